package cli

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/dbtest"
)

// A bulk resubmit selects every matching parked command, however many pages the dead-letter
// queue takes: here five entries read two at a time, all parked at the same instant so that the
// command id orders them within the cursor.
func TestSelectDLQWalksEveryPage(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		exec := drv.Executor()
		now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
		var parked []uuid.UUID
		var params []*driver.CommandInsertParams
		for i := range 6 {
			id := uuid.Must(uuid.NewV7())
			domain := "fx"
			if i == 5 {
				domain = "risk"
			}
			params = append(params, &driver.CommandInsertParams{ID: id, Kind: driver.CommandKindCommand, Domain: domain,
				Queue: domain + "__commands", Type: "BookFx", Data: []byte(`{}`), CorrelationID: id, MaxAttempts: 3,
				IdempotencyKey: fmt.Sprint("k-", i)})
			if domain == "fx" {
				parked = append(parked, id)
			}
		}
		_, err := exec.CommandInsertMany(ctx, &driver.CommandInsertManyParams{Commands: params, Now: &now})
		require.NoError(t, err)
		for _, p := range params {
			_, err := exec.CommandOperatorAction(ctx, &driver.CommandOperatorParams{ID: p.ID,
				FromStatuses: []driver.CommandStatus{driver.CommandStatusPending}, ToStatus: driver.CommandStatusInTSQ,
				Event: "PARKED", Actor: "ops", Reason: "hold", ErrorCode: "HELD", Now: &now})
			require.NoError(t, err)
		}

		b := &bulkFlags{domain: "fx", yes: true}
		items, err := selectDLQ(ctx, exec, b, now.Add(time.Hour), 2)
		require.NoError(t, err)
		got := make([]uuid.UUID, len(items))
		for i, it := range items {
			got[i] = it.ID
			require.Equal(t, "HELD", it.ErrorCode)
		}
		require.ElementsMatch(t, parked, got, "every fx entry once, over three pages")

		b = &bulkFlags{domain: "fx", olderThan: 2 * time.Hour, yes: true}
		items, err = selectDLQ(ctx, exec, b, now.Add(time.Hour), 2)
		require.NoError(t, err)
		require.Empty(t, items, "parked an hour ago, not two")
	})
}
