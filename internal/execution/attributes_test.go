package execution

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/dbtest"
)

// TestCheckpointAttributes writes search attributes through a lease: an invalid one fails its
// checkpoint alone, before anything is written, and the lease goes on.
func TestCheckpointAttributes(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		exec := drv.Executor()
		e := testEngine(t, exec, Config{})
		p := newParams("T", time.Minute)
		p.Attributes = map[string]string{"customer": "c-1"}
		leases, err := e.Insert(ctx, []*driver.ExecutionInsertParams{p})
		require.NoError(t, err)
		lease := leases[0]

		cp := lease.Base()
		cp.Attributes = map[string]string{"bad key": "v"}
		cp.Log = []*driver.ExecutionLogEntry{{EntryType: "STEP", Name: "a", StepStatus: "COMPLETED"}}
		require.ErrorIs(t, lease.Checkpoint(ctx, cp), driver.ErrInvalidAttribute)

		cp = lease.Base()
		cp.Attributes = map[string]string{"customer": "", "stage": "a"}
		cp.Log = []*driver.ExecutionLogEntry{{EntryType: "STEP", Name: "a", StepStatus: "COMPLETED"}}
		require.NoError(t, lease.Checkpoint(ctx, cp))
		attrs, err := exec.ExecutionAttributes(ctx, p.ID)
		require.NoError(t, err)
		require.Equal(t, map[string]string{"stage": "a"}, attrs)
		log, err := exec.ExecutionLogList(ctx, p.ID)
		require.NoError(t, err)
		require.Len(t, log, 2, "the rejected checkpoint wrote nothing and took no sequence number")
		require.Equal(t, 2, log[1].Seq)
	})
}
