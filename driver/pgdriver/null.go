package pgdriver

import (
	"encoding/json"

	"github.com/google/uuid"

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

func uuidPtr(id uuid.UUID) *uuid.UUID {
	if id == uuid.Nil {
		return nil
	}
	return &id
}

func derefUUID(id *uuid.UUID) uuid.UUID {
	if id == nil {
		return uuid.Nil
	}
	return *id
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
