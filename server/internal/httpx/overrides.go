package httpx

import (
	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/internal/input"
)

// OverrideText is what a text inside operator-supplied JSON (state overrides, a step or command
// result) may hold: printable, possibly several lines. PostgreSQL refuses \u0000 in jsonb.
var OverrideText = input.Text{Max: 10_000, Multiline: true}

// CheckCompleteOverrides is the one rule for completing an execution by hand, which the REST API
// and the console both apply before acting: every text in the overrides is printable, and check
// (the extensions' completion rule for the type, when one is set) holds.
func CheckCompleteOverrides(overrides map[string]any, check func(map[string]any) error) error {
	if p := OverrideText.CheckJSON(overrides); p != nil {
		return &commandbus.ValidationError{Field: JoinField("stateOverrides", p.Path), Message: p.Message}
	}
	if check != nil {
		return check(overrides)
	}
	return nil
}

// JoinField names the field at path inside field ("stateOverrides.note").
func JoinField(field, path string) string {
	if path == "" {
		return field
	}
	return field + "." + path
}
