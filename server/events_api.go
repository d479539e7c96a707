package server

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/orchestration"
	"github.com/commandbus/commandbus/server/internal/httpx"
)

// receiveEvent is POST /api/events: an inbound event (orchestration.InboundEvent) that starts
// the definitions its type triggers, once per (source, id). 202 with the receipt: started, a
// duplicate (the executions it started before) or unknown (acknowledged, nothing started); 400
// naming each bad field for a malformed event, which starts nothing.
func (s *Server) receiveEvent(w http.ResponseWriter, r *http.Request) {
	if err := parseQuery(r).err(); err != nil {
		s.writeError(w, r, err)
		return
	}
	if s.cfg.Runtime == nil {
		httpx.WriteProblem(w, http.StatusNotFound, "NOT_FOUND", "No orchestration runtime is served here.", "This server starts no executions; send events to an instance that runs the definitions.")
		return
	}
	body, err := readEventBody(w, r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	receipt, err := s.cfg.Runtime.ReceiveEvent(r.Context(), orchestration.EventTransportHTTP, body)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.cfg.Logger.Info("inbound event received through the API", "event_id", receipt.EventID, "event_type", receipt.EventType,
		"event_source", receipt.Source, "outcome", receipt.Outcome, "by", httpx.Subject(r))
	httpx.WriteJSON(w, http.StatusAccepted, receipt)
}

// readEventBody reads an event envelope: JSON (application/json or application/cloudevents+json
// when a Content-Type is given) of at most maxBodyBytes.
func readEventBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mediaType, _, err := mime.ParseMediaType(ct)
		if err != nil || (mediaType != "application/json" && !strings.HasSuffix(mediaType, "+json")) {
			return nil, &requestError{status: http.StatusUnsupportedMediaType, code: "UNSUPPORTED_MEDIA_TYPE",
				title: "The request body must be JSON.", detail: "Send Content-Type: application/json or application/cloudevents+json."}
		}
	}
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return nil, &requestError{status: http.StatusRequestEntityTooLarge, code: "PAYLOAD_TOO_LARGE",
			title: "The request body is too large.", detail: fmt.Sprintf("A request body may have at most %d bytes.", maxBodyBytes)}
	}
	if err != nil {
		return nil, &commandbus.ValidationError{Field: "body", Message: "could not be read: " + err.Error()}
	}
	return data, nil
}

// eventSchemas are the event route's schemas: the envelope (other CloudEvents attributes are
// allowed and ignored) and the receipt.
func eventSchemas() object {
	text := func(description string) object {
		return object{"type": "string", "minLength": 1, "maxLength": 200, "description": description}
	}
	return object{
		"InboundEvent": object{"type": "object", "required": []string{"id", "type", "source"}, "additionalProperties": true,
			"description": "A CloudEvents 1.0 event in structured mode. (source, id) identifies it: a redelivery starts nothing new.",
			"properties": object{
				"specversion": object{"type": "string", "enum": []string{"1.0"}},
				"id":          text("the event's id, unique within its source"),
				"type":        text("what happened; definitions are triggered by it"),
				"source":      text("the system the event comes from"),
				"time":        object{"type": "string", "format": "date-time", "description": "when it happened"},
				"tenant":      object{"type": "string", "maxLength": 200, "description": "the tenant of the started executions"},
				"data":        object{"description": "the payload, any JSON value; by default the started executions' input"},
			}},
		"EventReceipt": annotate(schemaOf[orchestration.EventReceipt](), map[string]object{
			"outcome":    {"enum": []string{string(orchestration.EventStarted), string(orchestration.EventDuplicate), string(orchestration.EventUnknown)}, "description": "started; duplicate: handled before, nothing new started; unknown: no definition is triggered by the type, acknowledged"},
			"executions": {"description": "the executions the event started (for a duplicate: started before), with ids derived from the event"},
		}),
	}
}

func eventOperations() []Operation {
	return []Operation{{ID: "receiveEvent", Method: "post", Path: "/api/events", Summary: "Receive an inbound event: start the definitions its type triggers, once per event", Tag: "events", BodyTypes: []string{"application/cloudevents+json"},
		Description: "Definitions name the event types that start them (a workflow's TriggeredBy, Runtime.Trigger). The event is deduplicated by (source, id) and each execution's id derives from the event, so sending it again starts nothing new. A malformed event gets 400 naming each bad field and starts nothing; an event type no definition is triggered by is acknowledged (202, outcome unknown) and counted in commandbus_inbound_events_total.",
		Operator:    true, Body: "InboundEvent",
		Example: object{"specversion": "1.0", "id": "evt-2026-0001", "type": "LoanApplied", "source": "loan-portal",
			"time": "2026-11-26T10:00:00Z", "data": object{"subject": "loan-8"}},
		Responses: object{"202": jsonResponse("The event was received: started, duplicate or unknown.", ref("EventReceipt")),
			"404": problem("This server runs no orchestration runtime.")}}}
}
