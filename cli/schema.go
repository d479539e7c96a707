package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/migrate"
)

// SchemaError says the database is not migrated, or is older than this binary: some migrations
// are pending. Commands return it before they touch a missing table, so an operator reads what
// to do instead of a raw "no such table".
type SchemaError struct {
	// Pending counts the migrations not applied yet.
	Pending int
	// Empty is true when no migration at all is applied (a fresh database).
	Empty bool
	// Behind names each line with pending migrations: "the payments migration line has 0 of 3
	// migrations applied".
	Behind []string
}

func (e *SchemaError) Error() string {
	if e.Empty {
		return "the database is not migrated: run `commandbus migrate up` with the same --database and --schema first"
	}
	plural := "s"
	if e.Pending == 1 {
		plural = ""
	}
	return fmt.Sprintf("the database schema is older than this binary (%d migration%s pending: %s): run `commandbus migrate up` with the same --database and --schema first",
		e.Pending, plural, strings.Join(e.Behind, "; "))
}

// requireSchema returns a *SchemaError when migrations of any registered line are pending on
// drv (an unmigrated database, or one older than this binary), and the migrate package's error
// when the database is newer than the binary. It reads the version table only.
func requireSchema(ctx context.Context, drv driver.Driver) error {
	if err := migrate.CheckVersion(ctx, drv); err != nil && !errors.Is(err, migrate.ErrSchemaOutdated) {
		return err
	}
	status, err := migrate.New(drv, nil).Status(ctx)
	if err != nil {
		return fmt.Errorf("reading the schema version: %w", err)
	}
	pending, applied := 0, 0
	type count struct{ applied, known int }
	var order []string
	byLine := map[string]*count{}
	for _, s := range status {
		c := byLine[s.Line]
		if c == nil {
			c = &count{}
			byLine[s.Line] = c
			order = append(order, s.Line)
		}
		c.known++
		if s.Applied {
			applied++
			c.applied++
		} else {
			pending++
		}
	}
	if pending == 0 {
		return nil
	}
	e := &SchemaError{Pending: pending, Empty: applied == 0}
	for _, line := range order {
		if c := byLine[line]; c.applied < c.known {
			what := "the core"
			if line != driver.CoreLine {
				what = "the " + line
			}
			e.Behind = append(e.Behind, fmt.Sprintf("%s migration line has %d of %d migrations applied", what, c.applied, c.known))
		}
	}
	return e
}

// openMigrated is OpenDatabase for the commands that read or act on the database: it refuses a
// database with pending migrations with a *SchemaError naming `commandbus migrate up`.
func openMigrated(ctx context.Context, url, schema string, poolSize int32) (*Database, error) {
	db, err := OpenDatabase(ctx, url, schema, poolSize)
	if err != nil {
		return nil, err
	}
	if err := requireSchema(ctx, db.Driver); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}
