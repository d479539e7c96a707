package payments_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/examples/payments"
	"github.com/commandbus/commandbus/examples/payments/fxapi"
	"github.com/commandbus/commandbus/process"
)

// bookAtProvider books a contract at the FX provider under key, as a booking request of an
// earlier attempt does when it reaches the provider, and returns the HTTP status.
func bookAtProvider(t *testing.T, f *fixture, key string) int {
	t.Helper()
	body, err := json.Marshal(fxapi.ContractRequest{SellCurrency: "EUR", BuyCurrency: "USD", SellAmount: decimal.RequireFromString("1000.00"), ValueDate: ""})
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, f.p.FXAPIURL()+"/v1/contracts", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set(fxapi.HeaderIdempotencyKey, key)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_ = resp.Body.Close()
	return resp.StatusCode
}

// An FX booking whose outcome the process never learns: the booking's reply is a business
// failure (as when a retry is rejected by the provider while an earlier attempt under the same
// step key is still booking), and that earlier booking lands at the provider either before the
// payment unwinds or after it. Either way, once the payment is COMPENSATED nothing stays booked:
// the failed step's compensation voids the booking's step key, which cancels a contract booked
// under it and refuses one that arrives later, at the provider and in the fx context.
func TestLateFxBookingIsUndone(t *testing.T) {
	t.Parallel()
	for _, landing := range []string{"before the unwinding", "after the unwinding"} {
		t.Run(landing, func(t *testing.T) {
			t.Parallel()
			eachProcess(t, func(t *testing.T, drv driver.Driver, typ string) {
				var mu sync.Mutex
				var keys []string
				var f *fixture
				f = setupWith(t, drv, payments.Options{}, func(p *payments.Platform) {
					payments.SetBeforeFxBooking(p, func(ctx context.Context, key string) error {
						mu.Lock()
						first := len(keys) == 0
						keys = append(keys, key)
						mu.Unlock()
						if !first {
							return nil
						}
						if landing == "before the unwinding" {
							// The earlier attempt's booking lands; this attempt never hears of it.
							if status := bookAtProvider(t, f, key); status != http.StatusCreated {
								return errors.New("the provider did not book the earlier attempt")
							}
						}
						return commandbus.BusinessRule("RATE_REJECTED", "the FX provider rejected the quote")
					})
				})
				res := f.submit(crossCurrency(typ))
				v := f.waitStatus(res.PaymentID, "COMPENSATED")
				require.Equal(t, "RATE_REJECTED", v.ErrorCode)
				mu.Lock()
				key := keys[0]
				mu.Unlock()

				inst, err := f.p.Runtime().Operations(modelOf(typ), typ).GetJSON(context.Background(), res.ExecutionID)
				require.NoError(t, err)
				var compensations []string
				for _, e := range inst.Log {
					if e.EntryType == "COMPENSATION" {
						compensations = append(compensations, e.Name)
					}
				}
				step := payments.StepNameBookFx
				if typ == payments.TypePaymentStep {
					step = payments.StepBookFx
				}
				require.Contains(t, compensations, step, "the failed booking's compensation ran")

				db, prefix := businessDB(t, drv)
				eventually(t, 20*time.Second, "the booking key to be voided at the provider", func() bool {
					var status string
					err := db.QueryRowContext(context.Background(), `SELECT status FROM `+prefix+`fxsim_contract WHERE idempotency_key = $1`, key).Scan(&status)
					return err == nil && status != fxapi.StatusBooked
				})
				if landing == "after the unwinding" {
					require.Equal(t, http.StatusConflict, bookAtProvider(t, f, key), "the provider refuses a booking under the voided key")
					// And a late delivery of the booking command is refused by the fx context.
					cmd, err := f.client.Send(context.Background(), payments.DomainFx, payments.BookFx{PaymentID: res.PaymentID,
						SellCurrency: "EUR", BuyCurrency: "USD", SellAmount: decimal.RequireFromString("1000.00")},
						&commandbus.SendOpts{Headers: map[string]string{process.HeaderStepKey: key}})
					require.NoError(t, err)
					eventually(t, 20*time.Second, "the late booking to be refused", func() bool {
						row, err := f.client.GetCommand(context.Background(), cmd.ID)
						require.NoError(t, err)
						return row.Status == driver.CommandStatusFailed
					})
				}
				eventually(t, 20*time.Second, "the compensations to finish", func() bool {
					leftovers, err := f.p.LeftoverEffects(context.Background())
					require.NoError(t, err)
					return leftovers == 0
				})
				var booked int
				require.NoError(t, db.QueryRowContext(context.Background(), `SELECT count(*) FROM `+prefix+`fxsim_contract WHERE status = 'BOOKED'`).Scan(&booked))
				require.Zero(t, booked, "nothing stays booked at the provider")
				require.NoError(t, db.QueryRowContext(context.Background(), `SELECT count(*) FROM `+prefix+`fx_contract WHERE status = 'BOOKED'`).Scan(&booked))
				require.Zero(t, booked, "nor in the fx context")
				f.checkInvariants()
			})
		})
	}
}
