package server

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/server/internal/httpx"
)

// outboxMessage is an outbox message as the API shows it.
type outboxMessage struct {
	ID          int64             `json:"id"`
	Category    string            `json:"category"`
	Transport   string            `json:"transport"`
	Topic       string            `json:"topic"`
	Key         string            `json:"key,omitempty"`
	Type        string            `json:"type"`
	MessageID   string            `json:"messageId"`
	Payload     json.RawMessage   `json:"payload"`
	Headers     map[string]string `json:"headers,omitempty"`
	Status      string            `json:"status"`
	Attempts    int               `json:"attempts"`
	NextAt      *time.Time        `json:"nextAt,omitempty"`
	LastError   string            `json:"lastError,omitempty"`
	CreatedAt   time.Time         `json:"createdAt"`
	PublishedAt *time.Time        `json:"publishedAt,omitempty"`
}

func outboxMessageOf(r *driver.OutboxRow) *outboxMessage {
	return &outboxMessage{ID: r.ID, Category: string(r.Category), Transport: r.Transport, Topic: r.Topic, Key: r.Key, Type: r.Type,
		MessageID: r.MessageID, Payload: r.Payload, Headers: r.Headers, Status: string(r.Status), Attempts: r.Attempts,
		NextAt: r.NextAt, LastError: r.LastError, CreatedAt: r.CreatedAt, PublishedAt: r.PublishedAt}
}

// outboxResendRequest resends an undelivered outbox message.
type outboxResendRequest struct {
	Reason string `json:"reason"`
}

var outboxStatuses = []string{string(driver.OutboxStatusNew), string(driver.OutboxStatusPublished), string(driver.OutboxStatusFailed)}

func (s *Server) listOutbox(w http.ResponseWriter, r *http.Request) {
	q := parseQuery(r, "status", "transport", "topic", "cursor", "limit")
	status := q.oneOf("status", outboxStatuses)
	params := &driver.OutboxListParams{Transport: q.text("transport"), Topic: q.text("topic"), BeforeID: q.cursorInt(),
		Limit: q.limit(defaultListLimit, maxListLimit)}
	if err := q.err(); err != nil {
		s.writeError(w, r, err)
		return
	}
	if status == "" {
		status = string(driver.OutboxStatusFailed)
	}
	params.Statuses = []driver.OutboxStatus{driver.OutboxStatus(status)}
	limit := params.Limit
	params.Limit++ // one more tells whether there is a next page
	rows, err := s.cfg.Client.OutboxMessages(r.Context(), params)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	items := make([]*outboxMessage, len(rows))
	for i, row := range rows {
		items[i] = outboxMessageOf(row)
	}
	httpx.WriteJSON(w, http.StatusOK, pageOf(items, limit, func(m *outboxMessage) string { return strconv.FormatInt(m.ID, 10) }))
}

func (s *Server) resendOutbox(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		err = &commandbus.ValidationError{Field: "id", Message: "must be a positive integer (an outbox message id)"}
	}
	var req outboxResendRequest
	err = errors.Join(err, decodeBody(w, r, &req))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	row, err := s.cfg.Client.ResendOutboxMessage(r.Context(), id, commandbus.OperatorAction{Actor: httpx.Subject(r), Reason: req.Reason})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, outboxMessageOf(row))
}

// outboxOperations document the outbox routes.
func outboxOperations() []Operation {
	return []Operation{
		{ID: "listOutbox", Method: "get", Path: "/api/outbox", Summary: "Outbox messages, newest first (undelivered ones by default)", Tag: "outbox",
			Description: "Messages the relays publish: brokered commands and replies, lifecycle events, webhooks. FAILED messages were given up on (a webhook's dead letter after its last attempt, a message the broker refused) and wait for an operator to resend them.",
			Params: []object{enumParam("status", "only this status; default FAILED", outboxStatuses, "FAILED"), textParam("transport", "only this transport (kafka, amqp, amqp10, webhook, inprocess)"),
				textParam("topic", "only this topic, queue or webhook endpoint"), cursorParam(), limitParam(defaultListLimit, maxListLimit)},
			Responses: object{"200": jsonResponse("A page of messages.", pageSchema(ref("OutboxMessage")))}},
		{ID: "resendOutbox", Method: "post", Path: "/api/outbox/{id}/resend", Summary: "Resend an undelivered (FAILED) outbox message (audited in the log)", Tag: "outbox", Operator: true,
			Description: "The message is due at once with a fresh attempt budget; the relay publishes it again.",
			Params:      []object{{"name": "id", "in": "path", "required": true, "description": "outbox message id", "schema": object{"type": "integer", "minimum": 1}}},
			Body:        "OutboxResend", Example: object{"reason": exampleReason},
			Responses: object{"200": jsonResponse("The message, NEW again.", ref("OutboxMessage")), "404": problem("No such message."),
				"409": problem("The message is not FAILED.")}},
	}
}

// outboxSchemas are the outbox routes' schemas.
func outboxSchemas() object {
	return object{
		"OutboxMessage": schemaOf[outboxMessage](),
		"OutboxResend":  annotate(requestSchemaOf[outboxResendRequest](), map[string]object{"reason": reasonAnnotation}),
	}
}
