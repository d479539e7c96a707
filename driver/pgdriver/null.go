package pgdriver

import (
	"sort"

	"encoding/json"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/commandbus/commandbus/driver"
)

func nullString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func nullJSON(b json.RawMessage) []byte {
	if len(b) == 0 {
		return nil
	}
	return b
}

// pgUUID passes a uuid to pgx in binary form; uuid.UUID itself would go through its
// driver.Valuer (a string) and be parsed again on every call. uuid.Nil becomes NULL.
func pgUUID(id uuid.UUID) pgtype.UUID { return pgtype.UUID{Bytes: id, Valid: id != uuid.Nil} }

// fromPgUUID reads a uuid scanned as pgtype.UUID; NULL becomes uuid.Nil.
func fromPgUUID(id pgtype.UUID) uuid.UUID {
	if !id.Valid {
		return uuid.Nil
	}
	return id.Bytes
}

func uuidPtr(id uuid.UUID) *uuid.UUID {
	if id == uuid.Nil {
		return nil
	}
	return &id
}

func derefString(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func limitOrDefault(limit int) int { return driver.LimitOrDefault(limit) }

func sortDepths(depths []*driver.QueueDepth) { driver.SortQueueDepths(depths) }

func sortStats(stats map[[2]string]*driver.CommandStat) []*driver.CommandStat {
	return driver.SortedCommandStats(stats)
}

// nullJSONText passes JSON as text (cast to jsonb in SQL), NULL when empty.
func nullJSONText(b []byte) *string {
	if len(b) == 0 {
		return nil
	}
	s := string(b)
	return &s
}

func sortClaimed[T any](s []T, less func(a, b T) bool) {
	sort.Slice(s, func(i, j int) bool { return less(s[i], s[j]) })
}

// pgUUIDs converts ids for a uuid[] parameter.
func pgUUIDs(ids []uuid.UUID) []pgtype.UUID {
	out := make([]pgtype.UUID, len(ids))
	for i, id := range ids {
		out[i] = pgUUID(id)
	}
	return out
}
