package sqlitedriver

import (
	"context"
	"database/sql"
	"errors"

	"github.com/commandbus/commandbus/driver"
)

func (e *executor) TccBarrierInsert(ctx context.Context, params *driver.TccBarrierInsertParams) (bool, error) {
	res, err := e.write.ExecContext(ctx, e.d.sql(`INSERT INTO {schema}.tcc_barrier (transaction_id, participant, phase, origin, created_at)
		VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`),
		params.Transaction, params.Participant, params.Phase, params.Origin, micros(now(params.Now)))
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

func (e *executor) TccBarrierGet(ctx context.Context, transaction, participant, phase string) (*driver.TccBarrierRow, error) {
	r := &driver.TccBarrierRow{}
	var created int64
	err := e.read.QueryRowContext(ctx, e.d.sql(`SELECT transaction_id, participant, phase, origin, created_at FROM {schema}.tcc_barrier
		WHERE transaction_id = ? AND participant = ? AND phase = ?`), transaction, participant, phase).
		Scan(&r.Transaction, &r.Participant, &r.Phase, &r.Origin, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, driver.ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	r.CreatedAt = fromMicros(created)
	return r, nil
}
