package server

import (
	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/examples/payments"
	"github.com/commandbus/commandbus/internal/input"
)

// overrideText is what a text inside operator-supplied JSON (state overrides, a step or command
// result) may hold: printable, possibly several lines. PostgreSQL refuses \u0000 in jsonb.
var overrideText = input.Text{Max: 10_000, Multiline: true}

// checkCompleteOverrides is the one rule for completing an execution by hand, which the REST API
// and the console both apply before acting: every text in the overrides is printable, and a
// payment is completed only on the evidence that it was made.
func checkCompleteOverrides(processType string, overrides map[string]any) error {
	if p := overrideText.CheckJSON(map[string]any(overrides)); p != nil {
		return &commandbus.ValidationError{Field: joinField("stateOverrides", p.Path), Message: p.Message}
	}
	return payments.CheckCompletion(processType, overrides)
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
