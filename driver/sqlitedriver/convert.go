package sqlitedriver

import (
	"database/sql"
	"encoding/json"
	"time"

	"github.com/google/uuid"
)

// Times are stored as INTEGER unix microseconds, the precision of a PostgreSQL timestamptz.

func micros(t time.Time) int64 { return t.UnixMicro() }

func fromMicros(us int64) time.Time { return time.UnixMicro(us).UTC() }

func nullMicros(t *time.Time) any {
	if t == nil {
		return nil
	}
	return t.UnixMicro()
}

func fromNullMicros(us sql.NullInt64) *time.Time {
	if !us.Valid {
		return nil
	}
	t := fromMicros(us.Int64)
	return &t
}

// now returns *at, or the process clock, truncated to microseconds in UTC so that the value
// written to columns and to audit entries is the value read back.
func now(at *time.Time) time.Time {
	t := time.Now()
	if at != nil {
		t = *at
	}
	return fromMicros(t.UnixMicro())
}

// auditTime formats a time for an audit entry the way encoding/json does.
func auditTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

func nullText(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// nullJSON passes JSON as TEXT (modernc binds []byte as a BLOB, which SQLite's JSON functions
// would read as JSONB).
func nullJSON(b json.RawMessage) any {
	if len(b) == 0 {
		return nil
	}
	return string(b)
}

func nullUUID(id uuid.UUID) any {
	if id == uuid.Nil {
		return nil
	}
	return id.String()
}

func parseNullUUID(s sql.NullString) (uuid.UUID, error) {
	if !s.Valid || s.String == "" {
		return uuid.Nil, nil
	}
	return uuid.Parse(s.String)
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
