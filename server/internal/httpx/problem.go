package httpx

import (
	"encoding/json"
	"net/http"
	"strings"
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
	// RequestID is the id the server logged the request under (a 500's cause is in that log line).
	RequestID string `json:"requestId,omitempty"`
}

// FieldProblem is one invalid input field.
type FieldProblem struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// Items is a list response: {"items": list}. A nil slice is sent as [], never null.
func Items[T any](list []T) map[string]any {
	if list == nil {
		list = []T{}
	}
	return map[string]any{"items": list}
}

// WriteJSON writes v as indented JSON with status.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// WriteProblem writes a problem document with status, code, title and detail.
func WriteProblem(w http.ResponseWriter, status int, code, title, detail string) {
	WriteProblemDoc(w, Problem{Status: status, Code: code, Title: title, Detail: detail})
}

// WriteProblemDoc writes p, with its type URL derived from its code.
func WriteProblemDoc(w http.ResponseWriter, p Problem) {
	p.Type = "https://commandbus.dev/problems/" + strings.ToLower(strings.ReplaceAll(p.Code, "_", "-"))
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(p.Status)
	_ = json.NewEncoder(w).Encode(p)
}

// Flatten expands joined errors.
func Flatten(err error) []error {
	if err == nil {
		return nil
	}
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range joined.Unwrap() {
			out = append(out, Flatten(e)...)
		}
		return out
	}
	return []error{err}
}
