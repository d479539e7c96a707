package pgdriver

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/commandbus/commandbus/driver"
)

func (e *executor) TccBarrierInsert(ctx context.Context, params *driver.TccBarrierInsertParams) (bool, error) {
	tag, err := e.db.Exec(ctx, e.d.sql(`INSERT INTO {schema}.tcc_barrier (transaction_id, participant, phase, origin, created_at)
		VALUES ($1, $2, $3, $4, coalesce($5::timestamptz, now())) ON CONFLICT DO NOTHING`),
		params.Transaction, params.Participant, params.Phase, params.Origin, params.Now)
	if err != nil {
		return false, err
	}
	return tag.RowsAffected() == 1, nil
}

func (e *executor) TccBarrierGet(ctx context.Context, transaction, participant, phase string) (*driver.TccBarrierRow, error) {
	r := &driver.TccBarrierRow{}
	err := e.db.QueryRow(ctx, e.d.sql(`SELECT transaction_id, participant, phase, origin, created_at FROM {schema}.tcc_barrier
		WHERE transaction_id = $1 AND participant = $2 AND phase = $3`), transaction, participant, phase).
		Scan(&r.Transaction, &r.Participant, &r.Phase, &r.Origin, &r.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, driver.ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	return r, nil
}
