package pgdriver

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/commandbus/commandbus/driver"
)

func (e *executor) MigrationTableEnsure(ctx context.Context) error {
	_, err := e.db.Exec(ctx, e.d.sql(`
		CREATE SCHEMA IF NOT EXISTS {schema};
		CREATE TABLE IF NOT EXISTS {schema}.migration (
			version    integer PRIMARY KEY,
			name       text NOT NULL,
			applied_at timestamptz NOT NULL DEFAULT now()
		)`))
	return err
}

func (e *executor) MigrationGetAll(ctx context.Context) ([]*driver.MigrationRow, error) {
	var exists bool
	if err := e.db.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, e.d.schema+".migration").Scan(&exists); err != nil {
		return nil, err
	}
	if !exists {
		return nil, nil
	}
	rows, err := e.db.Query(ctx, e.d.sql(`SELECT version, name, applied_at FROM {schema}.migration ORDER BY version`))
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (*driver.MigrationRow, error) {
		var m driver.MigrationRow
		err := row.Scan(&m.Version, &m.Name, &m.AppliedAt)
		return &m, err
	})
}

func (e *executor) MigrationInsert(ctx context.Context, params *driver.MigrationInsertParams) error {
	_, err := e.db.Exec(ctx, e.d.sql(`INSERT INTO {schema}.migration (version, name) VALUES ($1, $2)`), params.Version, params.Name)
	return err
}

func (e *executor) MigrationDelete(ctx context.Context, version int) error {
	_, err := e.db.Exec(ctx, e.d.sql(`DELETE FROM {schema}.migration WHERE version = $1`), version)
	return err
}

func (e *executor) MigrationLock(ctx context.Context) error {
	_, err := e.db.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext($1))`, "commandbus_migrate_"+e.d.schema)
	return err
}
