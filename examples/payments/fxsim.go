package payments

import (
	"context"
	"database/sql"
	"time"

	"github.com/shopspring/decimal"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/examples/payments/fxapi"
)

// fxStore keeps the simulated FX provider's contracts in the platform's database, so the endpoint
// every replica serves, and `commandbus simulate fx`, are one provider: a contract booked through
// one of them can be cancelled through any other, and outlives the instance that booked it.
type fxStore struct{ s *store }

// NewFXStore returns the simulated FX provider's store in the commandbus database of drv (the
// payments migration line's fxsim_contract table), for serving the provider apart from the
// platform (`commandbus simulate fx`). It fails unless the payments line is migrated.
func NewFXStore(ctx context.Context, drv driver.Driver) (fxapi.Store, error) {
	if err := checkSchema(ctx, drv); err != nil {
		return nil, err
	}
	st, err := openStore(drv, nil)
	if err != nil {
		return nil, err
	}
	return fxStore{st}, nil
}

const fxContractColumns = `id, sell_currency, buy_currency, sell_amount, buy_amount, rate, value_date, reference, status`

func (f fxStore) one(ctx context.Context, where string, arg string) (*fxapi.Contract, error) {
	var c fxapi.Contract
	var sell, buy, rate string
	err := f.s.db.QueryRowContext(ctx, f.s.q(`SELECT `+fxContractColumns+` FROM {t}fxsim_contract WHERE `+where), arg).
		Scan(&c.ID, &c.SellCurrency, &c.BuyCurrency, &sell, &buy, &rate, &c.ValueDate, &c.Reference, &c.Status)
	if notFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	c.SellAmount, c.BuyAmount, c.Rate = decimal.RequireFromString(sell), decimal.RequireFromString(buy), decimal.RequireFromString(rate)
	return &c, nil
}

// ByKey implements fxapi.Store.
func (f fxStore) ByKey(ctx context.Context, key string) (*fxapi.Contract, error) {
	return f.one(ctx, `idempotency_key = $1`, key)
}

// Insert implements fxapi.Store.
func (f fxStore) Insert(ctx context.Context, key string, c *fxapi.Contract) (*fxapi.Contract, bool, error) {
	res, err := f.s.db.ExecContext(ctx, f.s.q(`INSERT INTO {t}fxsim_contract (idempotency_key, `+fxContractColumns+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) ON CONFLICT (idempotency_key) DO NOTHING`),
		key, c.ID, c.SellCurrency, c.BuyCurrency, c.SellAmount.String(), c.BuyAmount.String(), c.Rate.String(), c.ValueDate, c.Reference, c.Status)
	if err != nil {
		return nil, false, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return nil, false, err
	}
	stored, err := f.ByKey(ctx, key)
	return stored, n == 1, err
}

// Get implements fxapi.Store.
func (f fxStore) Get(ctx context.Context, id string) (*fxapi.Contract, error) {
	return f.one(ctx, `id = $1`, id)
}

// Cancel implements fxapi.Store.
func (f fxStore) Cancel(ctx context.Context, id string) (*fxapi.Contract, error) {
	if _, err := f.s.db.ExecContext(ctx, f.s.q(`UPDATE {t}fxsim_contract SET status = 'CANCELLED' WHERE id = $1`), id); err != nil {
		return nil, err
	}
	return f.Get(ctx, id)
}

// Void implements fxapi.Store. The placeholder goes in first: once it or a contract holds the
// key, a booking under it can no longer be inserted, and the update then cancels whatever the
// key holds if it was booked.
func (f fxStore) Void(ctx context.Context, key, reference string) (*fxapi.Contract, error) {
	if _, err := f.s.db.ExecContext(ctx, f.s.q(`INSERT INTO {t}fxsim_contract (idempotency_key, `+fxContractColumns+`)
		VALUES ($1, $2, '', '', '0', '0', '0', '', $3, $4) ON CONFLICT DO NOTHING`),
		key, fxapi.VoidedID(key), reference, fxapi.StatusVoided); err != nil {
		return nil, err
	}
	if _, err := f.s.db.ExecContext(ctx, f.s.q(`UPDATE {t}fxsim_contract SET status = $2 WHERE idempotency_key = $1 AND status = $3`),
		key, fxapi.StatusCancelled, fxapi.StatusBooked); err != nil {
		return nil, err
	}
	return f.ByKey(ctx, key)
}

// roleLease is a role that one instance plays at a time: the holder renews it, and another
// instance takes it over once it expired (its holder died or froze).
type roleLease struct {
	s      *store
	role   string
	holder string
	ttl    time.Duration
}

// acquire takes or renews the lease and reports whether this instance holds it until the
// returned time.
func (l *roleLease) acquire(ctx context.Context) (bool, time.Time, error) {
	now := time.Now()
	until := now.Add(l.ttl)
	res, err := l.s.db.ExecContext(ctx, l.s.q(`UPDATE {t}role_lease SET holder = $2, expires_at = $3
		WHERE role = $1 AND (holder = $2 OR expires_at < $4)`), l.role, l.holder, micros(until), micros(now))
	if err != nil {
		return false, time.Time{}, err
	}
	n, err := res.RowsAffected()
	return n == 1, until, err
}

// release gives the lease up, so another instance takes the role at once.
func (l *roleLease) release(ctx context.Context) error {
	_, err := l.s.db.ExecContext(ctx, l.s.q(`UPDATE {t}role_lease SET expires_at = 0 WHERE role = $1 AND holder = $2`), l.role, l.holder)
	return err
}

// holder returns the lease's current holder and whether its lease is live.
func (l *roleLease) current(ctx context.Context) (string, bool, error) {
	var holder string
	var expires int64
	err := l.s.db.QueryRowContext(ctx, l.s.q(`SELECT holder, expires_at FROM {t}role_lease WHERE role = $1`), l.role).Scan(&holder, &expires)
	if err == sql.ErrNoRows {
		return "", false, nil
	}
	return holder, err == nil && expires > micros(time.Now()), err
}
