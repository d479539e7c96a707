package sqlitedriver

import (
	"encoding/json"
	"strings"

	"github.com/google/uuid"

	"github.com/commandbus/commandbus/driver"
)

// filter builds the WHERE clause of a list query; zero values do not filter. It mirrors the
// PostgreSQL driver's, with ? placeholders.
type filter struct {
	where []string
	args  []any
}

// cond adds a condition with its parameters.
func (f *filter) cond(c string, args ...any) {
	f.where = append(f.where, c)
	f.args = append(f.args, args...)
}

// equal filters column = value unless value is empty.
func (f *filter) equal(column, value string) {
	if value != "" {
		f.cond(column+" = ?", value)
	}
}

// equalID filters column = id unless id is nil.
func (f *filter) equalID(column string, id uuid.UUID) {
	if id != uuid.Nil {
		f.cond(column+" = ?", id.String())
	}
}

// beforeID pages backwards by id: canonical lower-case UUID text sorts like the UUID's bytes, as
// on PostgreSQL.
func (f *filter) beforeID(id uuid.UUID) {
	if id != uuid.Nil {
		f.cond("id < ?", id.String())
	}
}

// anyOf filters column IN values unless values is empty.
func anyOf[T ~string](f *filter, column string, values []T) {
	if len(values) == 0 {
		return
	}
	texts := make([]string, len(values))
	for i, v := range values {
		texts[i] = string(v)
	}
	encoded, _ := json.Marshal(texts) // a []string always encodes
	f.cond(column+" IN (SELECT value FROM json_each(?))", string(encoded))
}

// query completes "SELECT ... FROM table" with the WHERE clause, newest first, and the limit.
func (f *filter) query(selectFrom string, limit int) string {
	q := selectFrom
	if len(f.where) > 0 {
		q += " WHERE " + strings.Join(f.where, " AND ")
	}
	f.args = append(f.args, driver.LimitOrDefault(limit))
	return q + " ORDER BY id DESC LIMIT ?"
}
