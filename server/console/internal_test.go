package console

import (
	"testing"
	"time"

	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"
)

func TestFormatMoney(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ amount, currency, want string }{
		{"1082325", "JPY", "1,082,325 JPY"},
		{"284.5", "EUR", "284.50 EUR"},
		{"75000", "USD", "75,000.00 USD"},
		{"0.5", "GBP", "0.50 GBP"},
		{"-1234567.891", "USD", "-1,234,567.891 USD"}, // more places than the currency has: kept, never rounded away
		{"12.3", "ZZZ", "12.30 ZZZ"},                  // unknown: two places
	} {
		require.Equal(t, c.want, formatMoney(decimal.RequireFromString(c.amount), c.currency), c.amount+" "+c.currency)
	}
	now := time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)
	require.Equal(t, "0s", formatAge(now, now))
	require.Equal(t, "45s", formatAge(now.Add(-45*time.Second), now))
	require.Equal(t, "12m", formatAge(now.Add(-12*time.Minute), now))
	require.Equal(t, "3h 05m", formatAge(now.Add(-185*time.Minute), now))
	require.Equal(t, "2d 4h", formatAge(now.Add(-52*time.Hour), now))
	require.Equal(t, "—", formatAge((*time.Time)(nil), now))
}

func TestLocalPath(t *testing.T) {
	t.Parallel()
	for target, want := range map[string]string{
		"/payments/1?x=2": "/payments/1?x=2", "": "/", "//evil.example/x": "/", "https://evil.example": "/",
		"/\\evil.example": "/", "relative": "/", "/ok\r\nSet-Cookie: x": "/",
	} {
		require.Equal(t, want, localPath(target, "/"), target)
	}
}

func TestChartsAndSampler(t *testing.T) {
	t.Parallel()
	now := time.Now()
	var samples []sample
	for i := 0; i < 10; i++ {
		samples = append(samples, sample{At: now.Add(time.Duration(i-20) * time.Second), CommandsPerSecond: float64(i),
			QueueDepth: 100, TSQ: 2, Rates: i > 0})
	}
	// A gap breaks the line.
	samples = append(samples, sample{At: now, CommandsPerSecond: 3, QueueDepth: 50, Rates: true})
	charts := buildCharts(samples, time.Second, now)
	require.Len(t, charts, 4)
	require.Equal(t, "Commands completed per second", charts[0].Title)
	require.Equal(t, 9.0, charts[0].Peak)
	require.Equal(t, 3.0, charts[0].Latest)
	svg := string(charts[0].SVG)
	require.Contains(t, svg, `role="img"`)
	require.Contains(t, svg, "<polyline")
	require.Contains(t, svg, "<circle", "the point after the gap stands alone")
	require.Contains(t, svg, "peak 9.0/s")
	require.Equal(t, 10.0, niceCeil(9))
	require.Equal(t, 1.0, niceCeil(0))
	require.Equal(t, 200.0, niceCeil(101))

	s := newSampler(nil, nil, time.Second, nil)
	require.Len(t, s.ring, int(consoleWindow/time.Second)+1)
	s.stop() // never started: returns at once
}

// The actions the browser tests do not click: compensate and cancel, skip, reject an approval,
// answer failure; each audited with the session's subject.
