package pgdriver

import (
	"context"
	"errors"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/commandbus/commandbus/driver"
)

func (e *executor) BatchInsert(ctx context.Context, params *driver.BatchInsertParams) error {
	_, err := e.db.Exec(ctx, e.d.sql(`
		INSERT INTO {schema}.batch (id, name, domain, tenant_id, total, created_at)
		VALUES ($1, $2, $3, $4, $5, coalesce($6::timestamptz, now()))`),
		pgUUID(params.ID), params.Name, params.Domain, nullString(params.TenantID), params.Total, params.Now)
	return err
}

const batchCountsSQL = `
	SELECT status, count(*) FROM {schema}.command WHERE batch_id = $1 GROUP BY status`

func (e *executor) BatchGet(ctx context.Context, id uuid.UUID) (*driver.BatchRow, error) {
	row := e.db.QueryRow(ctx, e.d.sql(`
		SELECT id, name, domain, coalesce(tenant_id, ''), total, created_at, completed_at
		FROM {schema}.batch WHERE id = $1`), pgUUID(id))
	batch, err := scanBatch(row)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, driver.ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	if err := e.batchCounts(ctx, batch); err != nil {
		return nil, err
	}
	if batch.CompletedAt == nil && batch.Complete() {
		err := e.db.QueryRow(ctx, e.d.sql(`
			UPDATE {schema}.batch SET completed_at = coalesce(completed_at, now())
			WHERE id = $1 RETURNING completed_at`), pgUUID(id)).Scan(&batch.CompletedAt)
		if err != nil {
			return nil, err
		}
	}
	return batch, nil
}

func (e *executor) batchCounts(ctx context.Context, batch *driver.BatchRow) error {
	rows, err := e.db.Query(ctx, e.d.sql(batchCountsSQL), pgUUID(batch.ID))
	if err != nil {
		return err
	}
	defer rows.Close()
	batch.Counts = map[driver.CommandStatus]int64{}
	for rows.Next() {
		var status string
		var n int64
		if err := rows.Scan(&status, &n); err != nil {
			return err
		}
		batch.Counts[driver.CommandStatus(status)] = n
	}
	return rows.Err()
}

func (e *executor) BatchList(ctx context.Context, params *driver.BatchListParams) ([]*driver.BatchRow, error) {
	rows, err := e.db.Query(ctx, e.d.sql(`
		SELECT id, name, domain, coalesce(tenant_id, ''), total, created_at, completed_at
		FROM {schema}.batch ORDER BY created_at DESC, id DESC LIMIT $1`), limitOrDefault(params.Limit))
	if err != nil {
		return nil, err
	}
	batches, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*driver.BatchRow, error) { return scanBatch(row) })
	if err != nil {
		return nil, err
	}
	for _, b := range batches {
		if err := e.batchCounts(ctx, b); err != nil {
			return nil, err
		}
	}
	return batches, nil
}

func scanBatch(row pgx.Row) (*driver.BatchRow, error) {
	var b driver.BatchRow
	err := row.Scan(&b.ID, &b.Name, &b.Domain, &b.TenantID, &b.Total, &b.CreatedAt, &b.CompletedAt)
	return &b, err
}
