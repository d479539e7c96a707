package commandbus

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

func TestParseDuration(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name  string
		input string
		want  time.Duration
	}{
		{name: "Go seconds", input: "30s", want: 30 * time.Second},
		{name: "Go compound", input: "1h30m", want: 90 * time.Minute},
		{name: "Go fraction", input: "1.5h", want: 90 * time.Minute},
		{name: "Go milliseconds unit", input: "5ms", want: 5 * time.Millisecond},
		{name: "ISO hours", input: "PT1H", want: time.Hour},
		{name: "ISO days and hours", input: "P1DT2H", want: 26 * time.Hour},
		{name: "ISO days only", input: "P1D", want: 24 * time.Hour},
		{name: "ISO hours and minutes", input: "PT1H30M", want: 90 * time.Minute},
		{name: "ISO minutes", input: "PT30M", want: 30 * time.Minute},
		{name: "ISO seconds", input: "PT45S", want: 45 * time.Second},
		{name: "ISO fractional seconds", input: "PT0.5S", want: 500 * time.Millisecond},
		{name: "ISO every unit", input: "P1DT1H1M1S", want: 25*time.Hour + time.Minute + time.Second},
		{name: "milliseconds", input: "1000", want: time.Second},
		{name: "milliseconds small", input: "250", want: 250 * time.Millisecond},
		{name: "zero milliseconds", input: "0", want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()

			got, err := ParseDuration(tt.input)
			require.NoError(t, err)
			require.Equal(t, tt.want, got.Std())
		})
	}
}

func TestParseDurationErrors(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name    string
		input   string
		wantErr string
	}{
		{name: "empty", input: "", wantErr: "empty duration"},
		{name: "negative milliseconds", input: "-5", wantErr: "must not be negative"},
		{name: "negative Go duration", input: "-5s", wantErr: "must not be negative"},
		{name: "bare P", input: "P", wantErr: "ISO-8601"},
		{name: "bare PT", input: "PT", wantErr: "ISO-8601"},
		{name: "ISO weeks unsupported", input: "P1W", wantErr: "ISO-8601"},
		{name: "ISO lower case", input: "pt1h", wantErr: "ISO-8601"},
		{name: "no unit on a fraction", input: "1.5", wantErr: "milliseconds"},
		{name: "words", input: "soon", wantErr: `duration "soon"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()

			_, err := ParseDuration(tt.input)
			require.ErrorContains(t, err, tt.wantErr)
		})
	}
}

func TestDurationYAML(t *testing.T) {
	t.Parallel()

	type holder struct {
		Timeout Duration `yaml:"timeout"`
	}
	tests := []struct {
		name string
		yaml string
		want time.Duration
	}{
		{name: "Go duration", yaml: "timeout: 30s", want: 30 * time.Second},
		{name: "ISO-8601", yaml: "timeout: PT2H", want: 2 * time.Hour},
		{name: "integer milliseconds", yaml: "timeout: 1500", want: 1500 * time.Millisecond},
		{name: "quoted milliseconds", yaml: `timeout: "1500"`, want: 1500 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()

			var h holder
			require.NoError(t, yaml.Unmarshal([]byte(tt.yaml), &h))
			require.Equal(t, tt.want, h.Timeout.Std())
		})
	}

	t.Run("not a scalar", func(t *testing.T) {
		t.Parallel()

		var h holder
		err := yaml.Unmarshal([]byte("timeout:\n  seconds: 30\n"), &h)
		require.ErrorContains(t, err, "line 2: a duration must be a scalar")
	})

	t.Run("bad value names its line", func(t *testing.T) {
		t.Parallel()

		var h holder
		err := yaml.Unmarshal([]byte("\ntimeout: soon\n"), &h)
		require.ErrorContains(t, err, `line 2: duration "soon"`)
	})

	t.Run("marshals as a Go duration and reads back", func(t *testing.T) {
		t.Parallel()

		out, err := yaml.Marshal(holder{Timeout: Duration(90 * time.Minute)})
		require.NoError(t, err)
		require.Equal(t, "timeout: 1h30m0s\n", string(out))

		var back holder
		require.NoError(t, yaml.Unmarshal(out, &back))
		require.Equal(t, 90*time.Minute, back.Timeout.Std())
	})
}

func TestDurationUnmarshalText(t *testing.T) {
	t.Parallel()

	var d Duration
	require.NoError(t, d.UnmarshalText([]byte("PT1M")))
	require.Equal(t, time.Minute, d.Std())

	require.ErrorContains(t, d.UnmarshalText([]byte("later")), `duration "later"`)
	require.Equal(t, time.Minute, d.Std(), "a failed parse leaves the value unchanged")
}

func TestParseDurationRejectsOverflowAndEmptyTime(t *testing.T) {
	t.Parallel()
	for _, in := range []string{"9999999999999999", "PT2562048H", "P99999999999999999999D", "P1DT"} {
		_, err := ParseDuration(in)
		if err == nil {
			t.Errorf("ParseDuration(%q): want an error", in)
		}
	}
}
