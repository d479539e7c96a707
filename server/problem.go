package server

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/google/uuid"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/process"
)

// Problem is an RFC 9457 problem document with a stable code.
type Problem struct {
	Type   string         `json:"type"`
	Title  string         `json:"title"`
	Status int            `json:"status"`
	Code   string         `json:"code"`
	Detail string         `json:"detail,omitempty"`
	Errors []FieldProblem `json:"errors,omitempty"`
	// ExistingID names the original of a duplicate submission.
	ExistingID string `json:"existingId,omitempty"`
}

// FieldProblem is one invalid input field.
type FieldProblem struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// items is a list response: {"items": list}. A nil slice is sent as [], never null.
func items[T any](list []T) map[string]any {
	if list == nil {
		list = []T{}
	}
	return map[string]any{"items": list}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func writeProblem(w http.ResponseWriter, status int, code, title, detail string) {
	writeProblemDoc(w, Problem{Status: status, Code: code, Title: title, Detail: detail})
}

func writeProblemDoc(w http.ResponseWriter, p Problem) {
	p.Type = "https://commandbus.dev/problems/" + strings.ToLower(strings.ReplaceAll(p.Code, "_", "-"))
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(p.Status)
	_ = json.NewEncoder(w).Encode(p)
}

// writeError maps engine errors to problems: validation 400, not found 404, state conflicts 409,
// a busy execution 409 (retry), anything else 500.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	var fields []FieldProblem
	for _, e := range flatten(err) {
		var v *commandbus.ValidationError
		if errors.As(e, &v) {
			fields = append(fields, FieldProblem{Field: v.Field, Message: v.Message})
		}
	}
	var reqErr *requestError
	switch {
	case errors.As(err, &reqErr):
		writeProblem(w, reqErr.status, reqErr.code, reqErr.title, reqErr.detail)
	case len(fields) > 0:
		writeProblemDoc(w, Problem{Status: http.StatusBadRequest, Code: "VALIDATION_FAILED", Title: "The request is invalid; nothing was changed.", Errors: fields})
	case errors.Is(err, commandbus.ErrNotFound):
		writeProblem(w, http.StatusNotFound, "NOT_FOUND", "No such resource.", err.Error())
	case errors.Is(err, process.ErrBusy):
		writeProblem(w, http.StatusConflict, "BUSY", "A runner is working on it right now; try again in a moment.", err.Error())
	case errors.Is(err, commandbus.ErrInvalidState):
		writeProblem(w, http.StatusConflict, "INVALID_STATE", "The action does not apply in the current state.", err.Error())
	default:
		// The cause stays in the log: database errors name tables, constraints and SQLSTATEs that
		// are none of the client's business. The id ties the answer to the log entry.
		errorID := uuid.NewString()
		s.cfg.Logger.Error("request failed", "error_id", errorID, "method", r.Method, "path", r.URL.Path, "error", err)
		writeProblem(w, http.StatusInternalServerError, "INTERNAL", "The server failed to handle the request.",
			"The cause was logged with error id "+errorID+".")
	}
}

// flatten expands joined errors.
func flatten(err error) []error {
	if err == nil {
		return nil
	}
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range joined.Unwrap() {
			out = append(out, flatten(e)...)
		}
		return out
	}
	return []error{err}
}
