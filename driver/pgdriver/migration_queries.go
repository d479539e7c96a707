package pgdriver

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/commandbus/commandbus/driver"
)

// MigrationTableEnsure creates the version table, or upgrades one written before migration lines
// existed (version as the only key) by adding the line column, every existing row being the core
// line's.
func (e *executor) MigrationTableEnsure(ctx context.Context) error {
	if _, err := e.db.Exec(ctx, e.d.sql(`
		CREATE SCHEMA IF NOT EXISTS {schema};
		CREATE TABLE IF NOT EXISTS {schema}.migration (
			line       text NOT NULL DEFAULT 'core',
			version    integer NOT NULL,
			name       text NOT NULL,
			applied_at timestamptz NOT NULL DEFAULT now(),
			PRIMARY KEY (line, version)
		)`)); err != nil {
		return err
	}
	exists, lined, err := e.migrationTable(ctx)
	if err != nil || !exists || lined {
		return err
	}
	_, err = e.db.Exec(ctx, e.d.sql(`
		ALTER TABLE {schema}.migration ADD COLUMN line text NOT NULL DEFAULT 'core';
		ALTER TABLE {schema}.migration DROP CONSTRAINT migration_pkey;
		ALTER TABLE {schema}.migration ADD PRIMARY KEY (line, version)`))
	return err
}

// migrationTable reports whether the version table exists and whether it has the line column.
func (e *executor) migrationTable(ctx context.Context) (exists, lined bool, err error) {
	err = e.db.QueryRow(ctx, `
		SELECT to_regclass($1) IS NOT NULL,
		       EXISTS (SELECT 1 FROM information_schema.columns
		               WHERE table_schema = $2 AND table_name = 'migration' AND column_name = 'line')`,
		e.d.schema+".migration", e.d.schema).Scan(&exists, &lined)
	return exists, lined, err
}

func (e *executor) MigrationGetAll(ctx context.Context) ([]*driver.MigrationRow, error) {
	exists, lined, err := e.migrationTable(ctx)
	if err != nil {
		return nil, err
	}
	if !exists {
		return nil, nil
	}
	query := `SELECT line, version, name, applied_at FROM {schema}.migration ORDER BY line, version`
	if !lined {
		query = `SELECT 'core', version, name, applied_at FROM {schema}.migration ORDER BY version`
	}
	rows, err := e.db.Query(ctx, e.d.sql(query))
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (*driver.MigrationRow, error) {
		var m driver.MigrationRow
		err := row.Scan(&m.Line, &m.Version, &m.Name, &m.AppliedAt)
		return &m, err
	})
}

func (e *executor) MigrationInsert(ctx context.Context, params *driver.MigrationInsertParams) error {
	_, err := e.db.Exec(ctx, e.d.sql(`INSERT INTO {schema}.migration (line, version, name) VALUES ($1, $2, $3)`),
		lineOrCore(params.Line), params.Version, params.Name)
	return err
}

func (e *executor) MigrationDelete(ctx context.Context, line string, version int) error {
	_, err := e.db.Exec(ctx, e.d.sql(`DELETE FROM {schema}.migration WHERE line = $1 AND version = $2`), lineOrCore(line), version)
	return err
}

func (e *executor) MigrationLock(ctx context.Context) error {
	_, err := e.db.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext($1))`, "commandbus_migrate_"+e.d.schema)
	return err
}

func lineOrCore(line string) string {
	if line == "" {
		return driver.CoreLine
	}
	return line
}

// MigrationRecordSQL returns the statements a standalone migration script runs, inside the
// migration's transaction, to record (up) or forget (down) one version in the version table,
// creating the schema and the table first when they do not exist. It lets a migration be
// applied by a DBA's pipeline from a printed script (`commandbus migrate sql`) and still be seen
// as applied by the binary.
func (d *Driver) MigrationRecordSQL(line string, version int, name string, up bool) string {
	literal := func(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
	if !up {
		return d.sql(fmt.Sprintf(`DELETE FROM {schema}.migration WHERE line = %s AND version = %d;`, literal(lineOrCore(line)), version))
	}
	return d.sql(fmt.Sprintf(`CREATE SCHEMA IF NOT EXISTS {schema};
CREATE TABLE IF NOT EXISTS {schema}.migration (
	line       text NOT NULL DEFAULT 'core',
	version    integer NOT NULL,
	name       text NOT NULL,
	applied_at timestamptz NOT NULL DEFAULT now(),
	PRIMARY KEY (line, version)
);
INSERT INTO {schema}.migration (line, version, name) VALUES (%s, %d, %s);`, literal(lineOrCore(line)), version, literal(name)))
}
