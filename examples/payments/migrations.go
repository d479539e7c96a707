package payments

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"strings"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/migrate"
)

// MigrationLine is the name under which the platform's tables are migrated, next to the core's:
// `commandbus migrate up` (or migrate.New(drv, nil).Up) applies it in any program that imports
// this package.
const MigrationLine = "payments"

//go:embed migration/postgres/*.sql migration/sqlite/*.sql
var migrationFS embed.FS

func init() {
	migrate.Register(migrate.Line{Name: MigrationLine, Migrations: Migrations})
}

// Migrations returns the platform's schema migrations for drv ("postgres" or "sqlite"), with the
// table prefix substituted.
func Migrations(drv driver.Driver) ([]driver.Migration, error) {
	var dir string
	switch drv.Name() {
	case "postgres", "sqlite":
		dir = "migration/" + drv.Name()
	default:
		return nil, fmt.Errorf("payments: no migrations for driver %q", drv.Name())
	}
	sub, err := fs.Sub(migrationFS, dir)
	if err != nil {
		return nil, err
	}
	prefix := tablePrefix(drv.Name(), drv.Schema())
	return driver.MigrationFiles(sub, func(stmt string) string { return strings.ReplaceAll(stmt, "{t}", prefix) })
}

// tablePrefix is what {t} stands for: "<schema>.pay_" on PostgreSQL, "pay_" on SQLite.
func tablePrefix(driverName, schema string) string {
	if driverName == "postgres" {
		return quoteIdent(schema) + ".pay_"
	}
	return "pay_"
}

// checkSchema fails unless the payments migration line is exactly at this binary's version. It
// reads the version table only, so an instance start never takes a DDL lock.
func checkSchema(ctx context.Context, drv driver.Driver) error {
	if err := migrate.CheckLine(ctx, drv, MigrationLine); err != nil {
		return fmt.Errorf("payments: the platform's tables are not at this binary's version: %w", err)
	}
	return nil
}
