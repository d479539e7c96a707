package server

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/server/internal/httpx"
)

// dlqKey is the cursor key of a dead-letter entry: when it was parked (Unix microseconds) and
// its command id, the listing's order.
func dlqKey(e *commandbus.DLQEntry) string {
	return strconv.FormatInt(e.ParkedAt.UnixMicro(), 10) + "/" + e.CommandID.String()
}

// dlqCursor returns the entry the cursor parameter resumes after (nil when absent).
func (q *query) dlqCursor() *commandbus.DLQCursor {
	v := q.first("cursor")
	if v == "" {
		return nil
	}
	key, err := decodeCursor(v)
	at, id, ok := strings.Cut(key, "/")
	if err != nil || !ok {
		q.badCursor(v)
		return nil
	}
	micros, err := strconv.ParseInt(at, 10, 64)
	commandID, idErr := uuid.Parse(id)
	if err != nil || idErr != nil {
		q.badCursor(v)
		return nil
	}
	return &commandbus.DLQCursor{ParkedAt: time.UnixMicro(micros).UTC(), CommandID: commandID}
}

func (s *Server) listDLQ(w http.ResponseWriter, r *http.Request) {
	q := parseQuery(r, "domain", "type", "tenant", "cursor", "limit")
	filter := commandbus.DLQFilter{Domain: q.text("domain"), Type: q.text("type"), TenantID: q.text("tenant"),
		After: q.dlqCursor(), Limit: q.limit(defaultListLimit, maxListLimit)}
	if err := q.err(); err != nil {
		s.writeError(w, r, err)
		return
	}
	limit := filter.Limit
	filter.Limit++ // one more tells whether there is a next page
	rows, err := s.cfg.Client.DLQ().List(r.Context(), filter)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, pageOf(rows, limit, dlqKey))
}

// dlqOperations document the dead-letter routes.
func dlqOperations() []Operation {
	return []Operation{
		{ID: "listDLQ", Method: "get", Path: "/api/dlq", Summary: "Commands parked in the dead-letter queue, most recently parked first", Tag: "commands",
			Description: "The record written when each command was parked (command_dlq): when, by whom, after how many attempts, with which error, and the command. Resubmit one with POST /api/tsq/commands/{id}/retry or `commandbus dlq resubmit`.",
			Params: []object{textParam("domain", "only this domain"), textParam("type", "only this command type"), textParam("tenant", "only this tenant"),
				cursorParam(), limitParam(defaultListLimit, maxListLimit)},
			Responses: object{"200": jsonResponse("A page of parked commands.", pageSchema(ref("DLQEntry")))}},
	}
}

// dlqSchemas are the dead-letter routes' schemas.
func dlqSchemas() object {
	return object{"DLQEntry": schemaOf[driver.DLQRow]()}
}
