package commandbus

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Duration is a time.Duration that reads from configuration as a Go duration ("30s", "1h30m"),
// an ISO-8601 duration ("PT1H", "P1DT2H") or a bare integer number of milliseconds ("1000", as
// poll intervals are often written).
type Duration time.Duration

// Std returns the duration as a time.Duration.
func (d Duration) Std() time.Duration { return time.Duration(d) }

// String formats as a Go duration.
func (d Duration) String() string { return time.Duration(d).String() }

// MarshalYAML writes a Go duration string.
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

// UnmarshalYAML accepts a Go duration, an ISO-8601 duration or integer milliseconds.
func (d *Duration) UnmarshalYAML(node *yaml.Node) error {
	if node.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: a duration must be a scalar such as 30s, PT1H or 1000 (milliseconds)", node.Line)
	}
	parsed, err := ParseDuration(node.Value)
	if err != nil {
		return fmt.Errorf("line %d: %w", node.Line, err)
	}
	*d = parsed
	return nil
}

// UnmarshalText lets a Duration be read from flags and environment variables.
func (d *Duration) UnmarshalText(text []byte) error {
	parsed, err := ParseDuration(string(text))
	if err != nil {
		return err
	}
	*d = parsed
	return nil
}

var isoDurationRE = regexp.MustCompile(`^P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?$`)

// maxDuration bounds every parsed duration so arithmetic never wraps.
const maxDuration = time.Duration(1<<63 - 1)

// ParseDuration parses a Go duration, an ISO-8601 duration (days and smaller) or integer
// milliseconds.
func ParseDuration(s string) (Duration, error) {
	if s == "" {
		return 0, fmt.Errorf("empty duration")
	}
	tooLong := fmt.Errorf("duration %q is too long (the limit is about 290 years)", s)
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
		if ms < 0 {
			return 0, fmt.Errorf("duration %q must not be negative", s)
		}
		if ms > int64(maxDuration/time.Millisecond) {
			return 0, tooLong
		}
		return Duration(time.Duration(ms) * time.Millisecond), nil
	}
	if m := isoDurationRE.FindStringSubmatch(s); m != nil && s != "P" && !strings.HasSuffix(s, "T") {
		var total float64
		units := []time.Duration{24 * time.Hour, time.Hour, time.Minute}
		for i, unit := range units {
			if m[i+1] != "" {
				n, err := strconv.ParseFloat(m[i+1], 64)
				if err != nil {
					return 0, tooLong
				}
				total += n * float64(unit)
			}
		}
		if m[4] != "" {
			secs, _ := strconv.ParseFloat(m[4], 64)
			total += secs * float64(time.Second)
		}
		if total >= float64(maxDuration) {
			return 0, tooLong
		}
		return Duration(time.Duration(total)), nil
	}
	parsed, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("duration %q: use a Go duration (30s, 5m), ISO-8601 (PT1H) or milliseconds (1000)", s)
	}
	if parsed < 0 {
		return 0, fmt.Errorf("duration %q must not be negative", s)
	}
	return Duration(parsed), nil
}
