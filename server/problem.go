package server

import (
	"errors"
	"net/http"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/process"
	"github.com/commandbus/commandbus/server/internal/httpx"
)

// Problem is an RFC 9457 problem document with a stable code.
type Problem = httpx.Problem

// FieldProblem is one invalid input field.
type FieldProblem = httpx.FieldProblem

// writeError maps engine errors to problems: validation 400, not found 404, state conflicts 409,
// a busy execution 409 (retry), anything else 500.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	var fields []FieldProblem
	for _, e := range httpx.Flatten(err) {
		var v *commandbus.ValidationError
		if errors.As(e, &v) {
			fields = append(fields, FieldProblem{Field: v.Field, Message: v.Message})
		}
	}
	var reqErr *requestError
	switch {
	case errors.As(err, &reqErr):
		httpx.WriteProblem(w, reqErr.status, reqErr.code, reqErr.title, reqErr.detail)
	case len(fields) > 0:
		httpx.WriteProblemDoc(w, Problem{Status: http.StatusBadRequest, Code: "VALIDATION_FAILED", Title: "The request is invalid; nothing was changed.", Errors: fields})
	case errors.Is(err, commandbus.ErrNotFound):
		httpx.WriteProblem(w, http.StatusNotFound, "NOT_FOUND", "No such resource.", err.Error())
	case errors.Is(err, process.ErrBusy):
		httpx.WriteProblem(w, http.StatusConflict, "BUSY", "A runner is working on it right now; try again in a moment.", err.Error())
	case errors.Is(err, commandbus.ErrInvalidState):
		httpx.WriteProblem(w, http.StatusConflict, "INVALID_STATE", "The action does not apply in the current state.", err.Error())
	default:
		// The cause stays in the log: database errors name tables, constraints and SQLSTATEs that
		// are none of the client's business. The request id ties the answer to the log entry.
		id := httpx.LogID(r.Context())
		s.cfg.Logger.Error("request failed", "request_id", id, "method", r.Method, "path", r.URL.Path, "error", err)
		httpx.WriteProblemDoc(w, Problem{Status: http.StatusInternalServerError, Code: "INTERNAL", Title: "The server failed to handle the request.",
			Detail: "The cause was logged with request id " + id + ".", RequestID: id})
	}
}
