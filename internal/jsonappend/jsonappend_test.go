package jsonappend

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

var samples = []string{"", "plain", "step-1", "5f1d6c2e-6f0b-4f57-9b1e-2c8e2f9f0c11", `quo"te`, `back\slash`, "<b>&amp;</b>",
	"tab\tnew\nline\r", "\x00\x1f\x7f", "héllo", "日本", "\u2028\u2029", "bad \xff utf8", "emoji 🙂"}

func TestStringIsWhatEncodingJSONWrites(t *testing.T) {
	for _, s := range samples {
		want, err := json.Marshal(s)
		require.NoError(t, err)
		require.Equal(t, string(want), string(String([]byte("prefix:"), s))[len("prefix:"):], "%q", s)
	}
}

func TestStringMapIsWhatEncodingJSONWrites(t *testing.T) {
	maps := []map[string]string{nil, {}, {"a": "1"}}
	big := map[string]string{}
	for i, s := range samples {
		big[s] = samples[len(samples)-1-i]
	}
	for i := range 40 { // more keys than StringMap's stack array holds
		big[string(rune('A'+i))] = "v"
	}
	maps = append(maps, big)
	for _, m := range maps {
		want, err := json.Marshal(m)
		require.NoError(t, err)
		require.Equal(t, string(want), string(StringMap(nil, m)))
	}
}

func FuzzString(f *testing.F) {
	for _, s := range samples {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := json.Marshal(s)
		require.NoError(t, err)
		require.Equal(t, string(want), string(String(nil, s)))
	})
}
