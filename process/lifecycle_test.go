package process_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/dbtest"
)

// TestClientRestartsTwice cycles a client with a process manager through Stop and Start twice:
// every service (workers, completer, notifier, maintenance, execution engine) starts again, and
// executions started or answered while the client was stopped finish after the restart.
func TestClientRestartsTwice(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		b := setupOrder(t, drv, &orderProcess{})
		ctx := context.Background()
		for cycle := 1; cycle <= 2; cycle++ {
			stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
			require.NoError(t, b.client.Stop(stopCtx), "cycle %d: stop", cycle)
			cancel()
			require.NoError(t, b.client.Stop(ctx), "cycle %d: stopping a stopped client does nothing", cycle)

			// Started while stopped: it waits for the engine.
			id, err := b.manager.Start(ctx, orderState{OrderID: fmt.Sprint(cycle)})
			require.NoError(t, err)

			require.NoError(t, b.client.Start(ctx), "cycle %d: a stopped client starts again", cycle)
			require.Error(t, b.client.Start(ctx), "cycle %d: starting a running client is refused", cycle)
			inst := waitStatus(t, b.manager, id, driver.ExecutionWaitingForAsync)
			require.Equal(t, "R-"+fmt.Sprint(cycle), inst.State.Reserved, "cycle %d: the restarted engine ran the execution", cycle)
			require.NoError(t, b.manager.ProcessAsyncResponse(ctx, id, confirmed{By: "bank"}))
			waitStatus(t, b.manager, id, driver.ExecutionCompleted)
		}
	})
}
