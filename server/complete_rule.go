package server

import (
	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/internal/input"
)

// overrideText is what a text inside operator-supplied JSON (state overrides, a step or command
// result) may hold: printable, possibly several lines. PostgreSQL refuses \u0000 in jsonb.
var overrideText = input.Text{Max: 10_000, Multiline: true}

// checkCompleteOverrides is the one rule for completing an execution by hand, which the REST API
// and the console both apply before acting: every text in the overrides is printable, and the
// extensions' completion rule for the type holds.
func (s *Server) checkCompleteOverrides(processType string, overrides map[string]any) error {
	if p := overrideText.CheckJSON(map[string]any(overrides)); p != nil {
		return &commandbus.ValidationError{Field: joinField("stateOverrides", p.Path), Message: p.Message}
	}
	if rule := s.completionRule(processType); rule != nil {
		if rule.Check != nil {
			return rule.Check(overrides)
		}
	}
	return nil
}

// completionRule is the first rule an extension sets for processType, or nil.
func (s *Server) completionRule(processType string) *CompletionRule {
	for _, ext := range s.cfg.Extensions {
		if rule := ext.CompletionRule(processType); rule != nil {
			return rule
		}
	}
	return nil
}

// checkJSONText applies overrideText to a raw JSON value (a step or command result).
func checkJSONText(field string, raw []byte) error {
	if len(raw) == 0 {
		return nil
	}
	v, err := decodeAny(raw)
	if err != nil {
		return &commandbus.ValidationError{Field: field, Message: "must be valid JSON"}
	}
	if p := overrideText.CheckJSON(v); p != nil {
		return &commandbus.ValidationError{Field: joinField(field, p.Path), Message: p.Message}
	}
	return nil
}

func joinField(field, path string) string {
	if path == "" {
		return field
	}
	return field + "." + path
}
