package payments

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/shopspring/decimal"
	"github.com/sony/gobreaker/v2"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/examples/payments/fxapi"
)

func TestFxGatewayIdempotencyAndErrors(t *testing.T) {
	t.Parallel()
	api, err := fxapi.Listen("127.0.0.1:0", 1)
	require.NoError(t, err)
	api.Serve()
	t.Cleanup(func() { _ = api.Close(context.Background()) })
	g := newFxGateway(api.URL(), 200*time.Millisecond, 3)
	ctx := context.Background()
	req := fxapi.ContractRequest{SellCurrency: "EUR", BuyCurrency: "USD", SellAmount: decimal.RequireFromString("100"), ValueDate: "2026-11-23"}

	first, err := g.book(ctx, "exec-1:bookFx", req, Simulation{})
	require.NoError(t, err)
	again, err := g.book(ctx, "exec-1:bookFx", req, Simulation{})
	require.NoError(t, err)
	require.Equal(t, first.ID, again.ID, "the same Idempotency-Key returns the same contract")
	require.Equal(t, int64(1), api.Bookings())
	require.True(t, first.BuyAmount.Equal(first.SellAmount.Mul(first.Rate).Round(2)))

	req2 := req
	req2.SellAmount = decimal.RequireFromString("200")
	_, err = g.book(ctx, "exec-1:bookFx", req2, Simulation{})
	var permanent *commandbus.PermanentError
	require.ErrorAs(t, err, &permanent, "a key reused for another request is refused")

	_, err = g.book(ctx, "exec-2:bookFx", req, Simulation{Behavior: &StepBehavior{FailBusinessRulePct: 100}})
	var business *commandbus.BusinessRuleError
	require.ErrorAs(t, err, &business)
	require.Equal(t, "RATE_REJECTED", business.Code)

	start := time.Now()
	_, err = g.book(ctx, "exec-3:bookFx", req, Simulation{Behavior: &StepBehavior{TimeoutPct: 100}})
	var transient *commandbus.TransientError
	require.ErrorAs(t, err, &transient, "a hanging provider is a transient failure after bounded retries")
	require.Less(t, time.Since(start), 2*time.Second, "three attempts of 200ms and backoff")

	require.NoError(t, g.cancel(ctx, "exec-1:cancelFx", first.ID))
	require.NoError(t, g.cancel(ctx, "exec-1:cancelFx", first.ID), "cancelling again is harmless")
}

func TestFxGatewayCircuitBreakerOpens(t *testing.T) {
	t.Parallel()
	api, err := fxapi.Listen("127.0.0.1:0", 1)
	require.NoError(t, err)
	api.Serve()
	t.Cleanup(func() { _ = api.Close(context.Background()) })
	g := newFxGateway(api.URL(), time.Second, 1)
	ctx := context.Background()
	req := fxapi.ContractRequest{SellCurrency: "GBP", BuyCurrency: "CHF", SellAmount: decimal.RequireFromString("5"), ValueDate: "2026-11-23"}
	down := Simulation{Behavior: &StepBehavior{FailTransientPct: 100}}
	for i := range 10 {
		_, err := g.book(ctx, "k"+string(rune('a'+i)), req, down)
		var transient *commandbus.TransientError
		require.ErrorAs(t, err, &transient)
	}
	served := api.Requests()
	_, err = g.book(ctx, "healthy-now", req, Simulation{})
	var transient *commandbus.TransientError
	require.ErrorAs(t, err, &transient)
	require.Equal(t, "FX_CIRCUIT_OPEN", transient.Code)
	require.True(t, errors.Is(err, gobreaker.ErrOpenState))
	require.Equal(t, served, api.Requests(), "an open circuit does not call the provider")
}
