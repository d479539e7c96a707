package server

import (
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"

	"github.com/google/uuid"

	"github.com/commandbus/commandbus/internal/input"
)

// page is one page of a list route, newest first. Next is an opaque cursor: pass it as the
// cursor parameter to read the following page; it is absent, and HasMore false, on the last.
type page[T any] struct {
	Items   []T    `json:"items"`
	Next    string `json:"next,omitempty"`
	HasMore bool   `json:"hasMore"`
}

// cursorPrefix versions the cursor's encoding, so it can change without breaking a client
// that passes cursors back unread.
const cursorPrefix = "v1:"

// encodeCursor makes the opaque cursor that resumes a list after the row whose key (its id) is
// key.
func encodeCursor(key string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(cursorPrefix + key))
}

// decodeCursor reads the key of a cursor made by encodeCursor.
func decodeCursor(cursor string) (string, error) {
	raw, err := base64.RawURLEncoding.DecodeString(cursor)
	if err != nil || !strings.HasPrefix(string(raw), cursorPrefix) {
		return "", fmt.Errorf("not a cursor")
	}
	return strings.TrimPrefix(string(raw), cursorPrefix), nil
}

// badCursor records a cursor parameter the server did not make.
func (q *query) badCursor(v string) {
	q.bad("cursor", "must be the next value of a previous page, got "+input.Quote(v))
}

// cursor returns the row id the cursor parameter resumes after (uuid.Nil when absent).
func (q *query) cursor() uuid.UUID {
	v := q.first("cursor")
	if v == "" {
		return uuid.Nil
	}
	key, err := decodeCursor(v)
	id, perr := uuid.Parse(key)
	if err != nil || perr != nil {
		q.badCursor(v)
		return uuid.Nil
	}
	return id
}

// cursorInt returns the integer row id the cursor parameter resumes after (0 when absent).
func (q *query) cursorInt() int64 {
	v := q.first("cursor")
	if v == "" {
		return 0
	}
	key, err := decodeCursor(v)
	id, perr := strconv.ParseInt(key, 10, 64)
	if err != nil || perr != nil || id <= 0 {
		q.badCursor(v)
		return 0
	}
	return id
}

// cursorText returns the text key the cursor parameter resumes after ("" when absent).
func (q *query) cursorText() string {
	v := q.first("cursor")
	if v == "" {
		return ""
	}
	key, err := decodeCursor(v)
	if err != nil || key == "" {
		q.badCursor(v)
		return ""
	}
	return key
}

// uuidKey is the cursor key of a row with a UUID id.
func uuidKey(id uuid.UUID) string { return id.String() }

// pageOf cuts rows, read with a limit one larger than limit, to a page: a row beyond limit says
// there is a next page, which starts after the last row kept (key gives its cursor key).
func pageOf[T any](rows []T, limit int, key func(T) string) page[T] {
	p := page[T]{Items: rows}
	if len(rows) > limit {
		p.Items = rows[:limit]
		p.Next, p.HasMore = encodeCursor(key(rows[limit-1])), true
	}
	if p.Items == nil {
		p.Items = []T{}
	}
	return p
}

// cursorParam documents the cursor query parameter of a paged list.
func cursorParam() object {
	return queryParam("cursor", "the next value of the previous page; absent: the first page", object{"type": "string", "maxLength": 200}, nil)
}

// pageSchema is the schema of a page of items.
func pageSchema(items object) object {
	return object{"type": "object", "required": []string{"items", "hasMore"}, "properties": object{
		"items":   object{"type": "array", "items": items},
		"next":    object{"type": "string", "description": "an opaque cursor: pass it as the cursor parameter for the next page; absent on the last page"},
		"hasMore": object{"type": "boolean", "description": "whether there is a next page"},
	}}
}
