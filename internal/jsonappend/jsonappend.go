// Package jsonappend appends the JSON of strings and string maps to a buffer, byte for byte what
// encoding/json's Marshal writes, without its reflection and allocations: the outbox's hot paths
// (a lifecycle event's fields, a packed row's parts, a row's headers) write thousands of them a
// second. Plain strings are quoted as they are; any string that needs an escape is left to
// encoding/json.
package jsonappend

import (
	"encoding/json"
	"slices"
)

// String appends s as a JSON string, as json.Marshal(s) writes it.
func String(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			// Escapes, HTML-safe escapes and non-ASCII (invalid UTF-8, U+2028, U+2029): as
			// encoding/json writes them.
			quoted, _ := json.Marshal(s) // a string always marshals
			return append(b, quoted...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// StringMap appends m as a JSON object with its keys sorted, as json.Marshal(m) writes it
// ("null" for a nil map).
func StringMap(b []byte, m map[string]string) []byte {
	if m == nil {
		return append(b, "null"...)
	}
	var small [16]string
	keys := small[:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = String(b, k)
		b = append(b, ':')
		b = String(b, m[k])
	}
	return append(b, '}')
}
