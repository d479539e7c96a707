package input

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestTextCheck(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		text Text
		in   string
		bad  string // substring of the message; "" means accepted
	}{
		{"plain", Identifier, "CUST-USD-001", ""},
		{"unicode letters", Identifier, "Zürich 東京", ""},
		{"NUL", Identifier, "a\x00b", "U+0000"},
		{"escape", Identifier, "a\x1bb", "U+001B"},
		{"DEL", Identifier, "a\x7f", "U+007F"},
		{"C1 control", Identifier, "a\u0085", "U+0085"},
		{"line feed in an identifier", Identifier, "a\nb", "U+000A"},
		{"line feed in free text", Text{Multiline: true}, "a\nb\tc\r\n", ""},
		{"NUL in free text", Text{Multiline: true}, "a\x00", "U+0000"},
		{"invalid UTF-8", Identifier, "a\xffb", "UTF-8"},
		{"too long", Text{Max: 3}, "abcd", "4 characters long; at most 3"},
		{"long in runes, short enough", Text{Max: 3}, "äöü", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.text.Check(tc.in)
			if tc.bad == "" {
				require.Empty(t, got)
				return
			}
			require.Contains(t, got, tc.bad)
		})
	}
}

func TestCheckJSON(t *testing.T) {
	t.Parallel()
	free := Text{Max: 10, Multiline: true}
	require.Nil(t, free.CheckJSON(map[string]any{"evidence": "ok", "n": 3.0, "list": []any{"a", true, nil}}))
	p := free.CheckJSON(map[string]any{"outer": map[string]any{"list": []any{"fine", "bad\x00"}}})
	require.NotNil(t, p)
	require.Equal(t, "outer.list.1", p.Path)
	require.Contains(t, p.Message, "U+0000")
	p = free.CheckJSON(map[string]any{"k\x00": "v"})
	require.NotNil(t, p)
	require.Contains(t, p.Message, "key")
	p = free.CheckJSON("far too long a string")
	require.NotNil(t, p)
	require.Equal(t, "", p.Path)
}

func TestQuoteShortens(t *testing.T) {
	t.Parallel()
	require.Equal(t, `"abc"`, Quote("abc"))
	long := strings.Repeat("x", 1<<20)
	q := Quote(long)
	require.Less(t, len(q), 80, "an error never echoes a whole oversized input")
	require.Contains(t, q, "1048576 characters")
	require.Contains(t, Quote(strings.Repeat("é", 50)), "50 characters")
}
