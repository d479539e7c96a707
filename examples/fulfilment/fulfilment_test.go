package fulfilment_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/examples/fulfilment"
	"github.com/commandbus/commandbus/internal/dbtest"
	"github.com/commandbus/commandbus/orchestration"
	"github.com/commandbus/commandbus/saga"
)

func waitStatus(t *testing.T, m *saga.Manager, id uuid.UUID, want driver.ExecutionStatus) *saga.Result {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		r, err := m.Result(context.Background(), id)
		require.NoError(t, err)
		if r.Status == string(want) {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("order %s is %s (%s %s), want %s", id, r.Status, r.ErrorCode, r.Error, want)
		}
		time.Sleep(20 * time.Millisecond) // polling the stored status with a deadline
	}
}

func TestFulfilment(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		shop := fulfilment.NewShop(map[string]int{"MUG": 10, "TEE": 5, "CAP": 1})
		ms := func(n int) commandbus.Duration { return commandbus.Duration(time.Duration(n) * time.Millisecond) }
		client, err := commandbus.NewClient(drv, &commandbus.Config{
			Logger:  slog.New(slog.DiscardHandler),
			Process: commandbus.ProcessConfig{PendingPollInterval: ms(20), RetryPollInterval: ms(20)},
		})
		require.NoError(t, err)
		rt, err := orchestration.New(client, orchestration.Config{})
		require.NoError(t, err)
		orders, err := shop.Register(rt)
		require.NoError(t, err)
		require.Equal(t, saga.GroupedParallel, orders.Policy())
		require.NoError(t, client.Start(ctx))
		t.Cleanup(func() { _ = client.Stop(context.Background()) })
		items := []fulfilment.LineItem{{SKU: "MUG", Quantity: 2, Price: 800}, {SKU: "TEE", Quantity: 1, Price: 2000}}

		shipped, err := orders.Start(ctx, fulfilment.Order{ID: "o-1", Address: "1 Main St", Items: items})
		require.NoError(t, err)
		r := waitStatus(t, orders, shipped, driver.ExecutionCompleted)
		require.Equal(t, []string{"reserve:MUG", "reserve:TEE", "charge", "ship"}, r.Order)
		require.JSONEq(t, `{"charged":3600}`, string(r.Steps["charge"].Result))
		require.Equal(t, 8, shop.Stock("MUG"))
		require.Equal(t, 4, shop.Stock("TEE"))

		undeliverable, err := orders.Start(ctx, fulfilment.Order{ID: "o-2", Address: "Atlantis", Items: items})
		require.NoError(t, err)
		r = waitStatus(t, orders, undeliverable, driver.ExecutionCompensated)
		require.Equal(t, "UNDELIVERABLE", r.ErrorCode)
		require.Equal(t, "charge", r.CompensatedSteps[0], "the last layer first: the refund")
		require.ElementsMatch(t, []string{"reserve:MUG", "reserve:TEE"}, r.CompensatedSteps[1:], "then every reservation of the first layer")
		require.Equal(t, "refund", shop.Log[0])
		require.Equal(t, 8, shop.Stock("MUG"), "o-2's mugs are back")
		require.Equal(t, 4, shop.Stock("TEE"))
		require.EqualValues(t, 3600, shop.Charged(), "only o-1 stays charged")

		short, err := orders.Start(ctx, fulfilment.Order{ID: "o-3", Address: "1 Main St",
			Items: append(items, fulfilment.LineItem{SKU: "CAP", Quantity: 3, Price: 1500})})
		require.NoError(t, err)
		r = waitStatus(t, orders, short, driver.ExecutionCompensated)
		require.Equal(t, "OUT_OF_STOCK", r.ErrorCode)
		require.Equal(t, []string{"reserve:CAP"}, r.FailedSteps, "the failing item fails alone")
		require.ElementsMatch(t, []string{"reserve:MUG", "reserve:TEE"}, r.CompensatedSteps)
		require.Equal(t, saga.StepPending, r.Steps["charge"].Status)
		require.Equal(t, 8, shop.Stock("MUG"))
		require.Equal(t, 1, shop.Stock("CAP"))
		require.Equal(t, []string{"o-1"}, shop.Shipped)
	})
}
