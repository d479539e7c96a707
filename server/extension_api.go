package server

import (
	"maps"
	"net/http"

	"github.com/google/uuid"
)

// Helpers for an extension's REST routes and their OpenAPI operations, the same the server's own
// routes use, so every route reads and answers alike.

// Limits of list routes: the default and the largest limit a route accepts.
const (
	DefaultListLimit = defaultListLimit
	MaxListLimit     = maxListLimit
)

// Query reads a request's query parameters strictly: only the parameters a route takes, each at
// most once, each checked; Err reports every problem together.
type Query struct{ q *query }

// ParseQuery starts reading r's query; a parameter outside allowed is a problem.
func ParseQuery(r *http.Request, allowed ...string) *Query {
	return &Query{q: parseQuery(r, allowed...)}
}

// Text returns a printable text parameter of at most 200 characters ("" when absent).
func (q *Query) Text(name string) string { return q.q.text(name) }

// OneOf returns a parameter that must be one of allowed ("" when absent).
func (q *Query) OneOf(name string, allowed []string) string { return q.q.oneOf(name, allowed) }

// UUID returns a UUID parameter (uuid.Nil when absent).
func (q *Query) UUID(name string) uuid.UUID { return q.q.uuid(name) }

// Limit returns the limit parameter: an integer from 1 to most, def when absent.
func (q *Query) Limit(def, most int) int { return q.q.limit(def, most) }

// Cursor returns the key the cursor parameter resumes after: the key PageOf gave the last item
// of the previous page ("" when absent; a cursor the server did not make is a problem).
func (q *Query) Cursor() string { return q.q.cursorText() }

// BadCursor records the cursor parameter as a problem: the server made it, but its key is not
// one the route resumes from (a cursor of another list).
func (q *Query) BadCursor() { q.q.badCursor(q.q.first("cursor")) }

// Err returns every problem found, or nil.
func (q *Query) Err() error { return q.q.err() }

// PathID reads the path value "id" as a UUID; the error is a validation error naming it.
func PathID(r *http.Request) (uuid.UUID, error) { return pathID(r) }

// Ref points at a schema of the document's components.
func Ref(name string) map[string]any { return ref(name) }

// ItemsOf is the schema of a list response: {"items": [schema...]}.
func ItemsOf(schema map[string]any) map[string]any { return itemsOf(schema) }

// JSONResponse is a JSON response object with its schema.
func JSONResponse(description string, schema map[string]any) map[string]any {
	return jsonResponse(description, schema)
}

// ProblemResponse is a problem+json response object.
func ProblemResponse(description string) map[string]any { return problem(description) }

// PathParam is a path parameter holding a UUID.
func PathParam(name, description string) map[string]any { return pathParam(name, description) }

// EnumParam is an optional query parameter taking one of values; example may be "".
func EnumParam(name, description string, values []string, example string) map[string]any {
	return enumParam(name, description, values, example)
}

// UUIDParam is an optional query parameter holding a UUID.
func UUIDParam(name, description string) map[string]any { return uuidParam(name, description) }

// LimitParam is the limit query parameter, def by default, at most most.
func LimitParam(def, most int) map[string]any { return limitParam(def, most) }

// SchemaOf derives the JSON schema of a response type T from its fields and json tags.
func SchemaOf[T any]() map[string]any { return schemaOf[T]() }

// RequestSchemaOf derives the JSON schema of a request body type T: no unknown field.
func RequestSchemaOf[T any]() map[string]any { return requestSchemaOf[T]() }

// Annotate adds keywords (description, limits, enums) to properties of schema.
func Annotate(schema map[string]any, properties map[string]map[string]any) map[string]any {
	return annotate(schema, properties)
}

// ReasonSchema documents the reason every operator action carries.
func ReasonSchema() map[string]any { return maps.Clone(reasonAnnotation) }

// ListPage is one page of a list route: the items, the opaque cursor of the next page (absent
// on the last) and whether there is one. Every paged route answers this shape.
type ListPage[T any] = page[T]

// PageOf cuts rows, read with a limit one larger than limit, to a page: a row beyond limit says
// there is a next page, which resumes after the last row kept; key gives a row's cursor key (the
// value Query.Cursor returns for the next request), unique in the list's order.
func PageOf[T any](rows []T, limit int, key func(T) string) ListPage[T] {
	return pageOf(rows, limit, key)
}

// CursorParam documents the cursor query parameter of a paged list.
func CursorParam() map[string]any { return cursorParam() }

// PageSchema is the schema of a page of items: {"items": [...], "next": "...", "hasMore": bool}.
func PageSchema(items map[string]any) map[string]any { return pageSchema(items) }
