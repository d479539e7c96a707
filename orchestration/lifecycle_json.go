package orchestration

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/google/uuid"

	"github.com/commandbus/commandbus/internal/jsonappend"
)

// eventJSON returns the JSON of ev, byte for byte what json.Marshal(ev) writes, written field by
// field: encoding/json's reflection took a tenth of a busy engine's CPU with events on. id and
// exec are the string forms of ev.ID and ev.ExecutionID. What the fields cannot take on this path
// (a payload that needs HTML escapes, a time outside RFC 3339's years) goes to json.Marshal, as
// do its errors (an invalid payload).
func eventJSON(ev *LifecycleEvent, id, exec string) ([]byte, error) {
	b := make([]byte, 0, 320+len(ev.Payload)+len(ev.ErrorMessage))
	b = append(append(append(b, `{"id":"`...), id...), `","type":`...)
	b = jsonappend.String(b, string(ev.Type))
	b = append(append(append(b, `,"executionId":"`...), exec...), `","model":`...)
	b = jsonappend.String(b, ev.Model)
	b = append(b, `,"executionType":`...)
	b = jsonappend.String(b, ev.ExecutionType)
	b = appendNonEmpty(b, `,"tenantId":`, ev.TenantID)
	b = appendNonEmpty(b, `,"businessKey":`, ev.BusinessKey)
	b = strconv.AppendInt(append(b, `,"position":`...), ev.Position, 10)
	b = jsonappend.String(append(b, `,"status":`...), string(ev.Status))
	b = appendNonEmpty(b, `,"stepId":`, ev.StepID)
	if ev.Attempt != 0 {
		b = strconv.AppendInt(append(b, `,"attempt":`...), int64(ev.Attempt), 10)
	}
	b = appendNonEmpty(b, `,"errorCode":`, ev.ErrorCode)
	b = appendNonEmpty(b, `,"errorMessage":`, ev.ErrorMessage)
	b = appendNonEmpty(b, `,"actor":`, ev.Actor)
	b = appendNonEmpty(b, `,"reason":`, ev.Reason)
	if ev.Success {
		b = append(b, `,"success":true`...)
	}
	if ev.LatencyMs != 0 {
		b = strconv.AppendInt(append(b, `,"latencyMs":`...), ev.LatencyMs, 10)
	}
	if ev.RelatedID != uuid.Nil {
		b = append(append(append(b, `,"relatedId":"`...), ev.RelatedID.String()...), '"')
	}
	if len(ev.Payload) > 0 {
		// json.Marshal compacts a RawMessage escaping <, >, &, U+2028 and U+2029; json.Compact
		// writes the same without those escapes.
		if bytes.ContainsAny(ev.Payload, "<>&\u2028\u2029") {
			return json.Marshal(ev)
		}
		buf := bytes.NewBuffer(append(b, `,"payload":`...))
		if err := json.Compact(buf, ev.Payload); err != nil {
			return json.Marshal(ev)
		}
		b = buf.Bytes()
	}
	b, err := ev.At.AppendText(append(b, `,"at":"`...))
	if err != nil {
		return json.Marshal(ev)
	}
	return append(b, `"}`...), nil
}

// appendNonEmpty appends name and s as JSON, unless s is empty (omitempty).
func appendNonEmpty(b []byte, name, s string) []byte {
	if s == "" {
		return b
	}
	return jsonappend.String(append(b, name...), s)
}
