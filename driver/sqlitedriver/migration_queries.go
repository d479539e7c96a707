package sqlitedriver

import (
	"context"

	"github.com/commandbus/commandbus/driver"
)

func (e *executor) MigrationTableEnsure(ctx context.Context) error {
	_, err := e.write.ExecContext(ctx, e.d.sql(`
		CREATE TABLE IF NOT EXISTS {schema}.migration (
			version    INTEGER PRIMARY KEY NOT NULL,
			name       TEXT NOT NULL,
			applied_at INTEGER NOT NULL
		) STRICT`))
	return err
}

func (e *executor) MigrationGetAll(ctx context.Context) ([]*driver.MigrationRow, error) {
	var exists int
	if err := e.read.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = ?`,
		TablePrefix+"migration").Scan(&exists); err != nil {
		return nil, err
	}
	if exists == 0 {
		return nil, nil
	}
	rows, err := e.read.QueryContext(ctx, e.d.sql(`SELECT version, name, applied_at FROM {schema}.migration ORDER BY version`))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*driver.MigrationRow
	for rows.Next() {
		var m driver.MigrationRow
		var appliedAt int64
		if err := rows.Scan(&m.Version, &m.Name, &appliedAt); err != nil {
			return nil, err
		}
		m.AppliedAt = fromMicros(appliedAt)
		out = append(out, &m)
	}
	return out, rows.Err()
}

func (e *executor) MigrationInsert(ctx context.Context, params *driver.MigrationInsertParams) error {
	_, err := e.write.ExecContext(ctx, e.d.sql(`INSERT INTO {schema}.migration (version, name, applied_at) VALUES (?, ?, ?)`),
		params.Version, params.Name, micros(now(nil)))
	return err
}

func (e *executor) MigrationDelete(ctx context.Context, version int) error {
	_, err := e.write.ExecContext(ctx, e.d.sql(`DELETE FROM {schema}.migration WHERE version = ?`), version)
	return err
}

// MigrationLock needs no lock of its own: transactions begin IMMEDIATE on the single writer
// connection, so a migrating transaction already excludes every other writer.
func (e *executor) MigrationLock(ctx context.Context) error { return nil }
