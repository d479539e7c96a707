package bench

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/dbtest"
)

// TestRunInboundSmoke: a short run on both drivers starts one execution per distinct event, its
// redeliveries start nothing, and the result says so.
func TestRunInboundSmoke(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		res, err := RunInbound(context.Background(), drv, InboundConfig{Events: 200, Duplicates: 0.5, Senders: 4})
		require.NoError(t, err)
		require.Equal(t, 300, res.Deliveries)
		require.Equal(t, 200, res.Started)
		require.Equal(t, 100, res.Duplicates)
		require.Equal(t, int64(200), res.Executions)
		require.Greater(t, res.DeliveriesPerS, 0.0)
	})
}
