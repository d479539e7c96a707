package sqlitedriver

import (
	"context"

	"github.com/commandbus/commandbus/driver"
)

// MigrationTableEnsure creates the version table, or rebuilds one written before migration lines
// existed (version as the only key) with the line column, every existing row being the core
// line's.
func (e *executor) MigrationTableEnsure(ctx context.Context) error {
	exists, lined, err := e.migrationTable(ctx)
	if err != nil {
		return err
	}
	if exists && lined {
		return nil
	}
	create := `
		CREATE TABLE {schema}.migration (
			line       TEXT NOT NULL DEFAULT 'core',
			version    INTEGER NOT NULL,
			name       TEXT NOT NULL,
			applied_at INTEGER NOT NULL,
			PRIMARY KEY (line, version)
		) STRICT`
	if !exists {
		_, err := e.write.ExecContext(ctx, e.d.sql(create))
		return err
	}
	for _, stmt := range []string{
		`ALTER TABLE {schema}.migration RENAME TO {schema}.migration_unlined`,
		create,
		`INSERT INTO {schema}.migration (line, version, name, applied_at)
			SELECT 'core', version, name, applied_at FROM {schema}.migration_unlined`,
		`DROP TABLE {schema}.migration_unlined`,
	} {
		if _, err := e.write.ExecContext(ctx, e.d.sql(stmt)); err != nil {
			return err
		}
	}
	return nil
}

// migrationTable reports whether the version table exists and whether it has the line column.
func (e *executor) migrationTable(ctx context.Context) (exists, lined bool, err error) {
	var tables, lines int
	err = e.read.QueryRowContext(ctx, `
		SELECT (SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = ?1),
		       (SELECT count(*) FROM pragma_table_info(?1) WHERE name = 'line')`,
		TablePrefix+"migration").Scan(&tables, &lines)
	return tables > 0, lines > 0, err
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
	rows, err := e.read.QueryContext(ctx, e.d.sql(query))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*driver.MigrationRow
	for rows.Next() {
		var m driver.MigrationRow
		var appliedAt int64
		if err := rows.Scan(&m.Line, &m.Version, &m.Name, &appliedAt); err != nil {
			return nil, err
		}
		m.AppliedAt = fromMicros(appliedAt)
		out = append(out, &m)
	}
	return out, rows.Err()
}

func (e *executor) MigrationInsert(ctx context.Context, params *driver.MigrationInsertParams) error {
	_, err := e.write.ExecContext(ctx, e.d.sql(`INSERT INTO {schema}.migration (line, version, name, applied_at) VALUES (?, ?, ?, ?)`),
		lineOrCore(params.Line), params.Version, params.Name, micros(now(nil)))
	return err
}

func (e *executor) MigrationDelete(ctx context.Context, line string, version int) error {
	_, err := e.write.ExecContext(ctx, e.d.sql(`DELETE FROM {schema}.migration WHERE line = ? AND version = ?`), lineOrCore(line), version)
	return err
}

// MigrationLock needs no lock of its own: transactions begin IMMEDIATE on the single writer
// connection, so a migrating transaction already excludes every other writer.
func (e *executor) MigrationLock(ctx context.Context) error { return nil }

func lineOrCore(line string) string {
	if line == "" {
		return driver.CoreLine
	}
	return line
}
