package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/internal/input"
)

// queryObserver, when set (by the tests), is told the query parameters each route takes, so a
// test can compare them with the ones the OpenAPI document lists.
var queryObserver atomic.Pointer[func(r *http.Request, allowed []string)]

// maxBodyBytes bounds a request body. The largest legitimate body, a payment with a behavior for
// every simulated step, is a few kilobytes.
const maxBodyBytes = 64 << 10

// requestError is a problem with the request as a whole rather than with one of its fields: a
// body too large or not JSON.
type requestError struct {
	status int
	code   string
	title  string
	detail string
}

func (e *requestError) Error() string { return e.title + " " + e.detail }

// decodeBody decodes a JSON request body into v strictly: the body is JSON (Content-Type
// application/json when given), at most maxBodyBytes, one value with no data after it, and no
// field v does not have. An empty body decodes to the zero value. Problems are validation errors
// naming the field, or a requestError for the body as a whole.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) error {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mediaType, _, err := mime.ParseMediaType(ct)
		if err != nil || (mediaType != "application/json" && !strings.HasSuffix(mediaType, "+json")) {
			return &requestError{status: http.StatusUnsupportedMediaType, code: "UNSUPPORTED_MEDIA_TYPE",
				title: "The request body must be JSON.", detail: "Send Content-Type: application/json."}
		}
	}
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return &requestError{status: http.StatusRequestEntityTooLarge, code: "PAYLOAD_TOO_LARGE",
			title: "The request body is too large.", detail: fmt.Sprintf("A request body may have at most %d bytes.", maxBodyBytes)}
	}
	if err != nil {
		return &commandbus.ValidationError{Field: "body", Message: "could not be read: " + err.Error()}
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonProblem(err, v)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return &commandbus.ValidationError{Field: "body", Message: fmt.Sprintf("has data after the JSON value (at byte %d); send exactly one JSON object", dec.InputOffset())}
	}
	return nil
}

// jsonProblem turns a decoding error into a validation error naming the field where it can.
func jsonProblem(err error, v any) error {
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	var timeErr *time.ParseError
	switch {
	case errors.As(err, &typeErr):
		field := typeErr.Field
		if field == "" {
			return &commandbus.ValidationError{Field: "body", Message: fmt.Sprintf("must be a JSON object, got %s", typeErr.Value)}
		}
		return &commandbus.ValidationError{Field: field, Message: fmt.Sprintf("must be %s, got %s", describeType(typeErr.Type), typeErr.Value)}
	case errors.As(err, &syntaxErr):
		return &commandbus.ValidationError{Field: "body", Message: fmt.Sprintf("is not valid JSON at byte %d: %s", syntaxErr.Offset, syntaxErr.Error())}
	case errors.As(err, &timeErr):
		return &commandbus.ValidationError{Field: timeField(v), Message: fmt.Sprintf("must be an RFC 3339 time such as 2026-11-23T17:00:00Z, got %s", input.Quote(timeErr.Value))}
	case strings.HasPrefix(err.Error(), "Time.UnmarshalJSON"):
		return &commandbus.ValidationError{Field: timeField(v), Message: "must be an RFC 3339 time as a string, such as \"2026-11-23T17:00:00Z\""}
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		name, _ := strconv.Unquote(strings.TrimPrefix(err.Error(), "json: unknown field "))
		if input.Identifier.Check(name) != "" || len(name) > 60 {
			return &commandbus.ValidationError{Field: "body", Message: "has an unknown field " + input.Quote(name)}
		}
		return &commandbus.ValidationError{Field: name, Message: "is not a field of this request; see /api/openapi.json"}
	case errors.Is(err, io.ErrUnexpectedEOF):
		return &commandbus.ValidationError{Field: "body", Message: "ends before the JSON value is complete"}
	}
	message := err.Error()
	if len(message) > 200 {
		message = message[:200] + "…"
	}
	return &commandbus.ValidationError{Field: "body", Message: message}
}

// describeType names a Go type as a JSON type for a message.
func describeType(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return fmt.Sprintf("an integer between %d and %d", int64(-1)<<(t.Bits()-1), int64(1)<<(t.Bits()-1)-1)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a non-negative integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return "a " + t.String()
}

// timeField names the time field of a request type, for the one error encoding/json reports
// without a field (a time in the wrong format).
func timeField(v any) string {
	t := reflect.TypeOf(v)
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() != reflect.Struct {
		return "body"
	}
	var found []string
	for i := range t.NumField() {
		f := t.Field(i)
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if ft == timeType {
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			found = append(found, name)
		}
	}
	if len(found) == 1 {
		return found[0]
	}
	return "body"
}

// decodeAny decodes a JSON value as encoding/json does into any.
func decodeAny(raw []byte) (any, error) {
	var v any
	err := json.Unmarshal(raw, &v)
	return v, err
}

// query reads a request's query parameters strictly: only the parameters a route takes, each at
// most once, each checked; every problem is collected and reported together by err.
type query struct {
	values map[string][]string
	errs   []error
}

// parseQuery starts reading r's query; a parameter outside allowed is a problem.
func parseQuery(r *http.Request, allowed ...string) *query {
	if observe := queryObserver.Load(); observe != nil {
		(*observe)(r, allowed)
	}
	q := &query{values: r.URL.Query()}
	names := make([]string, 0, len(q.values))
	for name := range q.values {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		switch {
		case !slices.Contains(allowed, name):
			field := name
			if input.Identifier.Check(name) != "" || len(name) > 60 {
				field = "query"
			}
			takes := "none"
			if len(allowed) > 0 {
				takes = strings.Join(allowed, ", ")
			}
			q.bad(field, fmt.Sprintf("%s is not a parameter of this route (it takes %s)", input.Quote(name), takes))
		case len(q.values[name]) > 1:
			q.bad(name, "is given more than once")
		}
	}
	return q
}

func (q *query) bad(name, message string) {
	q.errs = append(q.errs, &commandbus.ValidationError{Field: name, Message: message})
}

// text returns a text parameter ("" when absent): printable, at most 200 characters.
func (q *query) text(name string) string {
	v := q.first(name)
	if msg := input.Identifier.Check(v); msg != "" {
		q.bad(name, msg)
		return ""
	}
	return v
}

// oneOf returns a parameter that must be one of allowed ("" when absent).
func (q *query) oneOf(name string, allowed []string) string {
	v := q.text(name)
	if v != "" && !slices.Contains(allowed, v) {
		q.bad(name, fmt.Sprintf("must be one of %s, got %s", strings.Join(allowed, ", "), input.Quote(v)))
		return ""
	}
	return v
}

// uuid returns a UUID parameter (uuid.Nil when absent).
func (q *query) uuid(name string) uuid.UUID {
	v := q.first(name)
	if v == "" {
		return uuid.Nil
	}
	id, err := uuid.Parse(v)
	if err != nil {
		q.bad(name, fmt.Sprintf("must be a UUID, got %s", input.Quote(v)))
		return uuid.Nil
	}
	return id
}

// limit returns the limit parameter: an integer from 1 to most, def when absent.
func (q *query) limit(def, most int) int {
	v := q.first("limit")
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > most {
		q.bad("limit", fmt.Sprintf("must be an integer from 1 to %d, got %s", most, input.Quote(v)))
		return def
	}
	return n
}

func (q *query) first(name string) string {
	if vs := q.values[name]; len(vs) > 0 {
		return vs[0]
	}
	return ""
}

// err returns every problem found, or nil.
func (q *query) err() error { return errors.Join(q.errs...) }

// Limits of list routes: the default and the largest limit a route accepts.
const (
	defaultListLimit = 100
	maxListLimit     = 1000
)
