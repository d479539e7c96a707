package payments

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/shopspring/decimal"
	"github.com/sony/gobreaker/v2"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/examples/payments/fxapi"
)

// fxGateway is the fx bounded context's anti-corruption layer: it translates contract bookings
// into calls to the external FX REST API, with a timeout per attempt, bounded retries with
// backoff, a circuit breaker, and the step key propagated as the Idempotency-Key header (so a
// retried or redelivered booking returns the contract booked the first time). It maps the
// provider's answers to commandbus errors: 409 is a business rejection, other 4xx permanent,
// 5xx, timeouts and an open circuit transient.
type fxGateway struct {
	baseURL  string
	client   *http.Client
	timeout  time.Duration
	attempts int
	backoff  time.Duration
	breaker  *gobreaker.CircuitBreaker[[]byte]
}

func newFxGateway(baseURL string, timeout time.Duration, attempts int) *fxGateway {
	g := &fxGateway{
		baseURL:  baseURL,
		client:   &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256, IdleConnTimeout: 90 * time.Second}},
		timeout:  timeout,
		attempts: attempts,
		backoff:  20 * time.Millisecond,
	}
	g.breaker = gobreaker.NewCircuitBreaker[[]byte](gobreaker.Settings{
		Name:        "fx-api",
		MaxRequests: 3,
		Timeout:     5 * time.Second,
		ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= 10 },
		// The provider answering "no" is a healthy provider: only unavailability trips it.
		IsSuccessful: func(err error) bool {
			var api *fxAPIError
			return err == nil || errors.As(err, &api) && api.status < 500
		},
	})
	return g
}

// fxAPIError is a non-2xx answer of the provider.
type fxAPIError struct {
	status int
	body   fxapi.Error
}

// Error describes the provider's answer.
func (e *fxAPIError) Error() string {
	return fmt.Sprintf("FX API answered %d %s: %s", e.status, e.body.Code, e.body.Message)
}

// call sends one request with retries; every attempt goes through the breaker.
func (g *fxGateway) call(ctx context.Context, method, path, key string, body any, sim Simulation) ([]byte, error) {
	payload, err := json.Marshal(body)
	if err != nil {
		return nil, commandbus.Permanent("FX_REQUEST_INVALID", err)
	}
	var simHeader string
	if sim.Behavior != nil {
		b := sim.Behavior
		encoded, _ := json.Marshal(fxapi.Simulate{FailPermanentPct: b.FailPermanentPct, FailTransientPct: b.FailTransientPct,
			FailBusinessRulePct: b.FailBusinessRulePct, TimeoutPct: b.TimeoutPct, MinDurationMs: b.MinDurationMs,
			MaxDurationMs: b.MaxDurationMs, Seed: sim.Seed})
		simHeader = string(encoded)
	}
	var last error
	for attempt := 1; attempt <= g.attempts; attempt++ {
		if attempt > 1 {
			select {
			case <-ctx.Done():
				return nil, commandbus.Transient(ctx.Err())
			case <-time.After(g.backoff << (attempt - 2)):
			}
		}
		out, err := g.breaker.Execute(func() ([]byte, error) {
			attemptCtx, cancel := context.WithTimeout(ctx, g.timeout)
			defer cancel()
			req, err := http.NewRequestWithContext(attemptCtx, method, g.baseURL+path, bytes.NewReader(payload))
			if err != nil {
				return nil, err
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set(fxapi.HeaderIdempotencyKey, key)
			if simHeader != "" {
				req.Header.Set(fxapi.HeaderSimulate, simHeader)
			}
			resp, err := g.client.Do(req)
			if err != nil {
				return nil, err
			}
			defer resp.Body.Close()
			data, err := io.ReadAll(resp.Body)
			if err != nil {
				return nil, err
			}
			if resp.StatusCode >= 300 {
				apiErr := &fxAPIError{status: resp.StatusCode}
				_ = json.Unmarshal(data, &apiErr.body)
				return nil, apiErr
			}
			return data, nil
		})
		if err == nil {
			return out, nil
		}
		last = err
		var api *fxAPIError
		switch {
		case errors.Is(err, gobreaker.ErrOpenState), errors.Is(err, gobreaker.ErrTooManyRequests):
			return nil, &commandbus.TransientError{Code: "FX_CIRCUIT_OPEN", Err: err}
		case errors.As(err, &api) && api.status == http.StatusConflict:
			return nil, commandbus.BusinessRule(api.body.Code, api.body.Message)
		case errors.As(err, &api) && api.status < 500:
			return nil, commandbus.Permanent("FX_"+api.body.Code, err)
		}
		if ctx.Err() != nil {
			break
		}
	}
	return nil, &commandbus.TransientError{Code: "FX_UNAVAILABLE", Err: last}
}

// book books a contract, idempotently on key.
func (g *fxGateway) book(ctx context.Context, key string, req fxapi.ContractRequest, sim Simulation) (*fxapi.Contract, error) {
	data, err := g.call(ctx, http.MethodPost, "/v1/contracts", key, req, sim)
	if err != nil {
		return nil, err
	}
	var c fxapi.Contract
	if err := json.Unmarshal(data, &c); err != nil {
		return nil, commandbus.Permanent("FX_RESPONSE_INVALID", err)
	}
	return &c, nil
}

// cancel cancels a contract, idempotently on key.
func (g *fxGateway) cancel(ctx context.Context, key, contractID string) error {
	_, err := g.call(ctx, http.MethodPost, "/v1/contracts/"+contractID+"/cancel", key, struct{}{}, Simulation{})
	return err
}

// void closes a booking key at the provider: its contract is cancelled, or a booking under it
// still in flight is refused (idempotent).
func (g *fxGateway) void(ctx context.Context, bookingKey, reference string) error {
	_, err := g.call(ctx, http.MethodPost, "/v1/contracts/void", bookingKey, fxapi.VoidRequest{Reference: reference}, Simulation{})
	return err
}

// errFxVoided refuses a booking whose key a compensation voided: the payment is unwinding.
func errFxVoided(key string) error {
	return commandbus.BusinessRule("FX_CONTRACT_VOIDED", "the FX booking "+key+" was cancelled by the payment's compensation")
}

// bookFx is the handler of BookFx and BookFxContract. It books at most one contract per step key,
// and none once the key is voided (cancelFx), even when this booking was in flight then.
func (p *Platform) bookFx(ctx context.Context, key string, args BookFx) (*FxResult, error) {
	if res, err := p.contractByKey(ctx, p.store.db, key); err == nil {
		if res.status != fxapi.StatusBooked {
			return nil, errFxVoided(key)
		}
		return res, nil
	} else if !notFound(err) {
		return nil, err
	}
	if fault, ok := p.faults.take(StepBookFx, false); ok {
		if err := outcomeError(StepBookFx, Outcome(fault)); err != nil {
			return nil, err
		}
	}
	if p.beforeFxBooking != nil {
		if err := p.beforeFxBooking(ctx, key); err != nil {
			return nil, err
		}
	}
	contract, err := p.fx.book(ctx, key, fxapi.ContractRequest{
		SellCurrency: args.SellCurrency, BuyCurrency: args.BuyCurrency, SellAmount: args.SellAmount,
		ValueDate: args.ValueDate, Reference: args.PaymentID.String(),
	}, args.Simulation)
	if err != nil {
		return nil, err
	}
	now := micros(p.now())
	res, err := p.store.db.ExecContext(ctx, p.store.q(`INSERT INTO {t}fx_contract
		(id, idempotency_key, payment_id, sell_currency, buy_currency, sell_amount, buy_amount, rate, status, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'BOOKED', $9, $9) ON CONFLICT (idempotency_key) DO NOTHING`),
		contract.ID, key, args.PaymentID.String(), contract.SellCurrency, contract.BuyCurrency,
		contract.SellAmount.String(), contract.BuyAmount.String(), contract.Rate.String(), now)
	if err != nil {
		return nil, err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		// Another delivery recorded it, or cancelFx voided the key meanwhile (it also voids the
		// key at the provider, which cancels the contract booked here).
		prior, err := p.contractByKey(ctx, p.store.db, key)
		if err != nil {
			return nil, err
		}
		if prior.status != fxapi.StatusBooked {
			return nil, errFxVoided(key)
		}
		return prior, nil
	}
	if err := p.afterEffect(StepBookFx); err != nil {
		return nil, err
	}
	return &FxResult{ContractID: contract.ID, Rate: contract.Rate, BuyAmount: contract.BuyAmount, BuyCurrency: contract.BuyCurrency}, nil
}

func (p *Platform) contractByKey(ctx context.Context, q queryer, key string) (*FxResult, error) {
	var res FxResult
	var rate, buy string
	if err := q.QueryRowContext(ctx, p.store.q(`SELECT id, rate, buy_amount, buy_currency, status FROM {t}fx_contract WHERE idempotency_key = $1`), key).
		Scan(&res.ContractID, &rate, &buy, &res.BuyCurrency, &res.status); err != nil {
		return nil, err
	}
	var err error
	if res.Rate, err = decimal.NewFromString(rate); err != nil {
		return nil, err
	}
	if res.BuyAmount, err = decimal.NewFromString(buy); err != nil {
		return nil, err
	}
	return &res, nil
}

func (p *Platform) handleBookFx(ctx context.Context, cmd *commandbus.Command[BookFx]) (any, error) {
	return p.bookFx(ctx, stepKey(cmd), cmd.Args)
}

func (p *Platform) handleBookFxContract(ctx context.Context, cmd *commandbus.Command[BookFxContract]) (any, error) {
	return p.bookFx(ctx, stepKey(cmd), BookFx(cmd.Args))
}

// cancelFx cancels the payment's contract with the provider, then records it (idempotent). Given
// the booking's step key, it voids that key, here and at the provider, before anything else: the
// compensation of a booking whose outcome is unknown (its reply was a failure, or never came)
// cancels a contract booked under the key, and a booking still in flight is refused, so once
// the payment is unwound nothing stays booked.
func (p *Platform) cancelFx(ctx context.Context, key string, args CancelFx) (any, error) {
	if p.beforeFxCancel != nil {
		p.beforeFxCancel(ctx)
	}
	if args.BookingKey != "" {
		return p.voidFx(ctx, args)
	}
	var status string
	err := p.store.db.QueryRowContext(ctx, p.store.q(`SELECT status FROM {t}fx_contract WHERE id = $1`), args.ContractID).Scan(&status)
	if notFound(err) {
		return map[string]string{"status": "NOT_BOOKED"}, nil
	}
	if err != nil {
		return nil, err
	}
	if status == "CANCELLED" {
		return map[string]string{"status": status}, nil
	}
	if err := p.fx.cancel(ctx, key, args.ContractID); err != nil {
		return nil, err
	}
	if _, err := p.store.db.ExecContext(ctx, p.store.q(`UPDATE {t}fx_contract SET status = 'CANCELLED', updated_at = $2 WHERE id = $1`),
		args.ContractID, micros(p.now())); err != nil {
		return nil, err
	}
	return map[string]string{"status": "CANCELLED"}, nil
}

// voidFx voids the booking key of args. The placeholder goes in first: once it or the booked
// contract holds the key, bookFx can record no new contract under it.
func (p *Platform) voidFx(ctx context.Context, args CancelFx) (any, error) {
	key := args.BookingKey
	now := micros(p.now())
	if _, err := p.store.db.ExecContext(ctx, p.store.q(`INSERT INTO {t}fx_contract
		(id, idempotency_key, payment_id, sell_currency, buy_currency, sell_amount, buy_amount, rate, status, created_at, updated_at)
		VALUES ($1, $2, $3, '', '', '0', '0', '0', $4, $5, $5) ON CONFLICT DO NOTHING`),
		fxapi.VoidedID(key), key, args.PaymentID.String(), fxapi.StatusVoided, now); err != nil {
		return nil, err
	}
	if err := p.fx.void(ctx, key, args.PaymentID.String()); err != nil {
		return nil, err
	}
	if _, err := p.store.db.ExecContext(ctx, p.store.q(`UPDATE {t}fx_contract SET status = $2, updated_at = $3
		WHERE idempotency_key = $1 AND status = $4`), key, fxapi.StatusCancelled, now, fxapi.StatusBooked); err != nil {
		return nil, err
	}
	var status string
	if err := p.store.db.QueryRowContext(ctx, p.store.q(`SELECT status FROM {t}fx_contract WHERE idempotency_key = $1`), key).Scan(&status); err != nil {
		return nil, err
	}
	if status == fxapi.StatusVoided {
		status = "NOT_BOOKED"
	}
	return map[string]string{"status": status}, nil
}

func (p *Platform) handleCancelFx(ctx context.Context, cmd *commandbus.Command[CancelFx]) (any, error) {
	return p.cancelFx(ctx, stepKey(cmd), cmd.Args)
}

func (p *Platform) handleCancelFxContract(ctx context.Context, cmd *commandbus.Command[CancelFxContract]) (any, error) {
	return p.cancelFx(ctx, stepKey(cmd), CancelFx(cmd.Args))
}

var _ = sql.ErrNoRows
