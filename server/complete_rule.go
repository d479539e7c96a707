package server

import (
	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/server/internal/httpx"
)

// checkCompleteOverrides applies the one rule for completing an execution by hand (which the
// console applies too): printable texts, and the extensions' completion rule for the type.
func (s *Server) checkCompleteOverrides(processType string, overrides map[string]any) error {
	var check func(map[string]any) error
	if rule := s.completionRule(processType); rule != nil {
		check = rule.Check
	}
	return httpx.CheckCompleteOverrides(overrides, check)
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

// checkJSONText applies the override text rule to a raw JSON value (a step or command result).
func checkJSONText(field string, raw []byte) error {
	if len(raw) == 0 {
		return nil
	}
	v, err := decodeAny(raw)
	if err != nil {
		return &commandbus.ValidationError{Field: field, Message: "must be valid JSON"}
	}
	if p := httpx.OverrideText.CheckJSON(v); p != nil {
		return &commandbus.ValidationError{Field: httpx.JoinField(field, p.Path), Message: p.Message}
	}
	return nil
}
