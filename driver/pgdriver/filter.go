package pgdriver

import (
	"fmt"
	"strings"

	"github.com/google/uuid"
)

// filter builds the WHERE clause of a list query with numbered parameters; zero values do not
// filter.
type filter struct {
	where []string
	args  []any
}

// arg adds a parameter and returns its placeholder.
func (f *filter) arg(v any) string {
	f.args = append(f.args, v)
	return fmt.Sprintf("$%d", len(f.args))
}

// cond adds a condition as it is.
func (f *filter) cond(c string) { f.where = append(f.where, c) }

// equal filters column = value unless value is empty.
func (f *filter) equal(column, value string) {
	if value != "" {
		f.cond(column + " = " + f.arg(value))
	}
}

// equalID filters column = id unless id is nil.
func (f *filter) equalID(column string, id uuid.UUID) {
	if id != uuid.Nil {
		f.cond(column + " = " + f.arg(pgUUID(id)))
	}
}

// beforeID pages backwards by id.
func (f *filter) beforeID(id uuid.UUID) {
	if id != uuid.Nil {
		f.cond("id < " + f.arg(pgUUID(id)))
	}
}

// anyOf filters status = ANY(values) unless values is empty.
func anyOf[T ~string](f *filter, column string, values []T) {
	if len(values) == 0 {
		return
	}
	texts := make([]string, len(values))
	for i, v := range values {
		texts[i] = string(v)
	}
	f.cond(column + " = ANY(" + f.arg(texts) + "::text[])")
}

// query completes "SELECT ... FROM table" with the WHERE clause, newest first, and the limit.
func (f *filter) query(selectFrom string, limit int) string {
	q := selectFrom
	if len(f.where) > 0 {
		q += " WHERE " + strings.Join(f.where, " AND ")
	}
	return q + " ORDER BY id DESC LIMIT " + f.arg(limitOrDefault(limit))
}
