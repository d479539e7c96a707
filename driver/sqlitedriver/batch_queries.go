package sqlitedriver

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"github.com/commandbus/commandbus/driver"
)

func (e *executor) BatchInsert(ctx context.Context, params *driver.BatchInsertParams) error {
	_, err := e.write.ExecContext(ctx, e.d.sql(`
		INSERT INTO {schema}.batch (id, name, domain, tenant_id, total, created_at)
		VALUES (?, ?, ?, ?, ?, ?)`),
		params.ID.String(), params.Name, params.Domain, nullText(params.TenantID), params.Total,
		micros(now(params.Now)))
	return err
}

const batchColumns = `id, name, domain, coalesce(tenant_id, ''), total, created_at, completed_at`

func (e *executor) BatchGet(ctx context.Context, id uuid.UUID) (*driver.BatchRow, error) {
	row := e.read.QueryRowContext(ctx, e.d.sql(`SELECT `+batchColumns+` FROM {schema}.batch WHERE id = ?`), id.String())
	batch, err := scanBatch(row)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, driver.ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	if err := e.batchCounts(ctx, batch); err != nil {
		return nil, err
	}
	if batch.CompletedAt == nil && batch.Complete() {
		// coalesce keeps the first stamp when two readers race to set it.
		var completedAt int64
		err := e.write.QueryRowContext(ctx, e.d.sql(`
			UPDATE {schema}.batch SET completed_at = coalesce(completed_at, ?)
			WHERE id = ? RETURNING completed_at`), micros(now(nil)), id.String()).Scan(&completedAt)
		if err != nil {
			return nil, err
		}
		batch.CompletedAt = fromNullMicros(sql.NullInt64{Int64: completedAt, Valid: true})
	}
	return batch, nil
}

func (e *executor) batchCounts(ctx context.Context, batch *driver.BatchRow) error {
	rows, err := e.read.QueryContext(ctx, e.d.sql(`
		SELECT status, count(*) FROM {schema}.command WHERE batch_id = ? GROUP BY status`), batch.ID.String())
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
	rows, err := e.read.QueryContext(ctx, e.d.sql(`SELECT `+batchColumns+` FROM {schema}.batch
		ORDER BY created_at DESC, id DESC LIMIT ?`), driver.LimitOrDefault(params.Limit))
	if err != nil {
		return nil, err
	}
	var batches []*driver.BatchRow
	for rows.Next() {
		b, err := scanBatch(rows)
		if err != nil {
			rows.Close()
			return nil, err
		}
		batches = append(batches, b)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for _, b := range batches {
		if err := e.batchCounts(ctx, b); err != nil {
			return nil, err
		}
	}
	return batches, nil
}

func scanBatch(row rowScanner) (*driver.BatchRow, error) {
	var b driver.BatchRow
	var id string
	var createdAt int64
	var completedAt sql.NullInt64
	if err := row.Scan(&id, &b.Name, &b.Domain, &b.TenantID, &b.Total, &createdAt, &completedAt); err != nil {
		return nil, err
	}
	var err error
	if b.ID, err = uuid.Parse(id); err != nil {
		return nil, fmt.Errorf("decoding batch id %q: %w", id, err)
	}
	b.CreatedAt = fromMicros(createdAt)
	b.CompletedAt = fromNullMicros(completedAt)
	return &b, nil
}
