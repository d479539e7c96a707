package commandbus

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The defaults work together: a command step waits for its reply at least as long as its
// command can take when every attempt's worker is killed (each lease must expire before the
// command is claimed again), plus the polls that find it; so a killed worker costs latency,
// never a WAIT_TIMEOUT for an operator.
func TestDefaultStepTimeoutOutlastsRedelivery(t *testing.T) {
	t.Parallel()
	cfg := (&Config{}).WithDefaults()
	d := cfg.Domain("fx")
	require.Equal(t, 93600*time.Millisecond, d.RedeliveryWindow(), "3 leases of 30s, and 1s then 2s of backoff with 20% jitter")
	require.Greater(t, DefaultCommandStepTimeout, DefaultVisibilityTimeout)
	require.GreaterOrEqual(t, DefaultCommandStepTimeout,
		d.RedeliveryWindow()+time.Duration(DefaultMaxAttempts)*DefaultFetchPollInterval,
		"the default reply timeout must outlast every redelivery and the polls that find it")
	require.Equal(t, Duration(DefaultCommandStepTimeout), cfg.CommandStepOr("bookFx", "fx", "BookFx").Timeout)

	// A domain with a longer lease gets a longer default wait.
	cfg = (&Config{Domains: map[string]*DomainConfig{"fx": {VisibilityTimeout: Duration(time.Minute)}}}).WithDefaults()
	require.Equal(t, 183600*time.Millisecond, cfg.Domain("fx").RedeliveryWindow())
	require.Equal(t, Duration(183600*time.Millisecond), cfg.CommandStepOr("other", "fx", "X").Timeout)
}
