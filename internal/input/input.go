// Package input checks text and JSON values that arrive from outside (REST bodies, query
// parameters, operator forms) before anything is written: control characters, invalid UTF-8 and
// sizes. PostgreSQL refuses a NUL byte in TEXT and the escape \u0000 in jsonb, so a value that
// passes here can be stored on both drivers.
//
// Checks return a message for the caller to wrap in its own validation error (it names the
// field), or "" when the value is fine. Messages never repeat the whole value: Quote shortens it.
package input

import (
	"fmt"
	"strconv"
	"unicode"
	"unicode/utf8"
)

// Text describes what a text value may hold.
type Text struct {
	// Max is the most characters (runes) allowed; 0 means no limit.
	Max int
	// Multiline allows line feeds, carriage returns and tabs (free text such as a reason); every
	// other control character is refused either way.
	Multiline bool
}

// Identifier is an id, key, code or name: one line of at most 200 characters.
var Identifier = Text{Max: 200}

// Check returns what is wrong with s, or "".
func (t Text) Check(s string) string {
	if !utf8.ValidString(s) {
		return "is not valid UTF-8"
	}
	n := 0
	for i, r := range s {
		n++
		if unicode.IsControl(r) && !(t.Multiline && (r == '\n' || r == '\r' || r == '\t')) {
			return fmt.Sprintf("contains the control character %U at byte %d; use printable text", r, i)
		}
	}
	if t.Max > 0 && n > t.Max {
		return fmt.Sprintf("is %d characters long; at most %d are allowed", n, t.Max)
	}
	return ""
}

// JSONProblem is what is wrong at one place of a JSON value.
type JSONProblem struct {
	// Path is the dotted path below the value ("" for the value itself, "evidence",
	// "lines.2.note").
	Path    string
	Message string
}

// CheckJSON walks a decoded JSON value (as encoding/json decodes into any) and returns the first
// string or object key that t refuses, or nil.
func (t Text) CheckJSON(v any) *JSONProblem {
	return t.walk("", v)
}

func (t Text) walk(path string, v any) *JSONProblem {
	switch x := v.(type) {
	case string:
		if msg := t.Check(x); msg != "" {
			return &JSONProblem{Path: path, Message: msg}
		}
	case map[string]any:
		for k, e := range x {
			if msg := Identifier.Check(k); msg != "" {
				return &JSONProblem{Path: path, Message: "has a key that " + msg}
			}
			if p := t.walk(join(path, k), e); p != nil {
				return p
			}
		}
	case []any:
		for i, e := range x {
			if p := t.walk(join(path, strconv.Itoa(i)), e); p != nil {
				return p
			}
		}
	}
	return nil
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// quoteMax is how many characters of a value Quote keeps.
const quoteMax = 40

// Quote quotes s for an error message, shortened to its first 40 characters with the length
// said, so an error never echoes a whole oversized input back.
func Quote(s string) string {
	if utf8.RuneCountInString(s) <= quoteMax {
		return strconv.Quote(s)
	}
	n, cut := 0, 0
	for i := range s {
		if n == quoteMax {
			cut = i
			break
		}
		n++
	}
	return fmt.Sprintf("%s… (%d characters)", strconv.Quote(s[:cut]), utf8.RuneCountInString(s))
}
