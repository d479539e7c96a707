// Package migrate applies the embedded, versioned schema migrations of a commandbus driver, and
// those of the applications that register their own migration lines.
//
// A line is a named sequence of migrations numbered 1, 2, ... The core line (driver.CoreLine)
// holds commandbus's own tables and is the same on every driver; an application registers its
// tables as another line (Register), with its own SQL per driver and its own version numbers.
// Every line is recorded in the driver's one version table under its name. Each migration runs
// in its own transaction under a lock, so two processes migrating at once apply each version
// exactly once.
//
//	m := migrate.New(drv, logger)
//	if _, err := m.Up(ctx); err != nil { ... } // the core line, then every registered line
package migrate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/commandbus/commandbus/driver"
)

// ErrSchemaNewer means the database was migrated by a newer binary; running this one against it
// could corrupt data, so the caller must upgrade.
var ErrSchemaNewer = errors.New("database schema is newer than this binary")

// ErrSchemaOutdated means migrations are pending.
var ErrSchemaOutdated = errors.New("database schema is out of date")

// Line is a named sequence of migrations that an application registers next to the core's.
type Line struct {
	// Name identifies the line in the version table; it must not be driver.CoreLine.
	Name string
	// Migrations returns the line's migrations for drv (typically chosen by drv.Name() and with
	// drv.Schema() substituted), numbered 1, 2, ... without gaps.
	Migrations func(drv driver.Driver) ([]driver.Migration, error)
}

var registry struct {
	sync.Mutex
	lines []Line
}

// Register adds a migration line that Up, Down and Status handle after the core line, in the
// order of registration. It panics when the name is empty, the core's, or already registered:
// registration belongs in a package's init.
func Register(line Line) {
	registry.Lock()
	defer registry.Unlock()
	if line.Name == "" || line.Name == driver.CoreLine || line.Migrations == nil {
		panic(fmt.Sprintf("migrate: cannot register line %q", line.Name))
	}
	for _, l := range registry.lines {
		if l.Name == line.Name {
			panic(fmt.Sprintf("migrate: line %q registered twice", line.Name))
		}
	}
	registry.lines = append(registry.lines, line)
}

// Lines returns the names of every line Up applies: the core line first, then the registered
// lines in registration order.
func Lines() []string {
	registry.Lock()
	defer registry.Unlock()
	out := []string{driver.CoreLine}
	for _, l := range registry.lines {
		out = append(out, l.Name)
	}
	return out
}

// lineMigrations is a line with its migrations for one driver.
type lineMigrations struct {
	name       string
	migrations []driver.Migration
}

// migrationsOf returns the migrations of the named lines on drv (every line when names is empty).
func migrationsOf(drv driver.Driver, names []string) ([]lineMigrations, error) {
	registry.Lock()
	registered := slices.Clone(registry.lines)
	registry.Unlock()
	for _, name := range names {
		known := name == driver.CoreLine
		for _, l := range registered {
			known = known || l.Name == name
		}
		if !known {
			return nil, fmt.Errorf("migrate: unknown migration line %q (known: %v)", name, Lines())
		}
	}
	wanted := func(name string) bool { return len(names) == 0 || slices.Contains(names, name) }
	var out []lineMigrations
	if wanted(driver.CoreLine) {
		out = append(out, lineMigrations{name: driver.CoreLine, migrations: drv.Migrations()})
	}
	for _, l := range registered {
		if !wanted(l.Name) {
			continue
		}
		migrations, err := l.Migrations(drv)
		if err != nil {
			return nil, fmt.Errorf("migration line %s: %w", l.Name, err)
		}
		out = append(out, lineMigrations{name: l.Name, migrations: migrations})
	}
	return out, nil
}

// Migrator applies migrations.
type Migrator struct {
	drv    driver.Driver
	logger *slog.Logger
	only   []string
}

// New returns a migrator for drv that handles the core line and every registered line. A nil
// logger discards logs.
func New(drv driver.Driver, logger *slog.Logger) *Migrator {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Migrator{drv: drv, logger: logger}
}

// Only returns a migrator restricted to the named lines.
func (m *Migrator) Only(lines ...string) *Migrator {
	out := *m
	out.only = slices.Clone(lines)
	return &out
}

// Applied describes a migration applied or reverted by Up or Down.
type Applied struct {
	Line     string
	Version  int
	Name     string
	Duration time.Duration
}

// Status is one migration and whether the database has it.
type Status struct {
	Line      string
	Version   int
	Name      string
	Applied   bool
	AppliedAt *time.Time
}

// Up applies every pending migration, line by line in order, and returns what it applied.
func (m *Migrator) Up(ctx context.Context) ([]Applied, error) {
	lines, err := migrationsOf(m.drv, m.only)
	if err != nil {
		return nil, err
	}
	var applied []Applied
	for _, line := range lines {
		for _, mig := range line.migrations {
			done, err := m.step(ctx, line.name, mig, true)
			if err != nil {
				return applied, err
			}
			if done != nil {
				applied = append(applied, *done)
			}
		}
	}
	return applied, nil
}

// Down reverts the newest steps migrations (all of them when steps <= 0): the lines in reverse
// order, each from its newest version.
func (m *Migrator) Down(ctx context.Context, steps int) ([]Applied, error) {
	lines, err := migrationsOf(m.drv, m.only)
	if err != nil {
		return nil, err
	}
	current, err := m.currentVersions(ctx)
	if err != nil {
		return nil, err
	}
	var reverted []Applied
	for l := len(lines) - 1; l >= 0; l-- {
		migrations := lines[l].migrations
		for i := len(migrations) - 1; i >= 0; i-- {
			if steps > 0 && len(reverted) >= steps {
				return reverted, nil
			}
			if !current[lineVersion{lines[l].name, migrations[i].Version}] {
				continue
			}
			done, err := m.step(ctx, lines[l].name, migrations[i], false)
			if err != nil {
				return reverted, err
			}
			if done != nil {
				reverted = append(reverted, *done)
			}
		}
	}
	return reverted, nil
}

// Status lists every known migration with its state, plus versions the database has that this
// binary does not know (those of the core line make CheckVersion fail).
func (m *Migrator) Status(ctx context.Context) ([]Status, error) {
	lines, err := migrationsOf(m.drv, m.only)
	if err != nil {
		return nil, err
	}
	rows, err := m.drv.Executor().MigrationGetAll(ctx)
	if err != nil {
		return nil, err
	}
	byVersion := map[lineVersion]*driver.MigrationRow{}
	for _, r := range rows {
		byVersion[lineVersion{r.Line, r.Version}] = r
	}
	var out []Status
	for _, line := range lines {
		for _, mig := range line.migrations {
			key := lineVersion{line.name, mig.Version}
			s := Status{Line: line.name, Version: mig.Version, Name: mig.Name}
			if r, ok := byVersion[key]; ok {
				s.Applied = true
				at := r.AppliedAt
				s.AppliedAt = &at
				delete(byVersion, key)
			}
			out = append(out, s)
		}
	}
	for _, r := range rows {
		if len(m.only) > 0 && !slices.Contains(m.only, r.Line) {
			continue
		}
		if _, unknown := byVersion[lineVersion{r.Line, r.Version}]; unknown {
			at := r.AppliedAt
			out = append(out, Status{Line: r.Line, Version: r.Version, Name: r.Name + " (unknown to this binary)", Applied: true, AppliedAt: &at})
		}
	}
	return out, nil
}

// CheckVersion returns nil when the database has exactly the core migrations this binary knows,
// ErrSchemaNewer when it has more, and ErrSchemaOutdated when some are pending. It reads the
// version table only: it never takes a DDL lock.
func CheckVersion(ctx context.Context, drv driver.Driver) error {
	return check(ctx, drv, driver.CoreLine, drv.Migrations())
}

// CheckLine is CheckVersion for a registered line: nil when the database has exactly the line's
// migrations this binary knows, ErrSchemaNewer when it has more, ErrSchemaOutdated (telling the
// user to run `commandbus migrate up`) when some are pending.
func CheckLine(ctx context.Context, drv driver.Driver, name string) error {
	lines, err := migrationsOf(drv, []string{name})
	if err != nil {
		return err
	}
	return check(ctx, drv, name, lines[0].migrations)
}

func check(ctx context.Context, drv driver.Driver, line string, known []driver.Migration) error {
	rows, err := drv.Executor().MigrationGetAll(ctx)
	if err != nil {
		return fmt.Errorf("reading schema version: %w", err)
	}
	latest := 0
	if len(known) > 0 {
		latest = known[len(known)-1].Version
	}
	dbVersion, applied := 0, 0
	for _, r := range rows {
		if r.Line != line {
			continue
		}
		applied++
		dbVersion = max(dbVersion, r.Version)
	}
	what := "the database"
	if line != driver.CoreLine {
		what = fmt.Sprintf("the %s migration line", line)
	}
	switch {
	case dbVersion > latest:
		return fmt.Errorf("%w: %s is at version %d but this binary knows versions up to %d; upgrade before running it against this database", ErrSchemaNewer, what, dbVersion, latest)
	case applied < len(known):
		return fmt.Errorf("%w: %s has %d of %d migrations applied; run `commandbus migrate up` (or migrate.New(driver, nil).Up)", ErrSchemaOutdated, what, applied, len(known))
	}
	return nil
}

// lineVersion identifies a migration across lines.
type lineVersion struct {
	line    string
	version int
}

func (m *Migrator) currentVersions(ctx context.Context) (map[lineVersion]bool, error) {
	rows, err := m.drv.Executor().MigrationGetAll(ctx)
	if err != nil {
		return nil, err
	}
	out := map[lineVersion]bool{}
	for _, r := range rows {
		out[lineVersion{r.Line, r.Version}] = true
	}
	return out, nil
}

// step applies (up) or reverts (down) one migration in a transaction, unless another migrator
// already did. It returns nil, nil when there was nothing to do.
func (m *Migrator) step(ctx context.Context, line string, mig driver.Migration, up bool) (*Applied, error) {
	start := time.Now()
	var did bool
	label := fmt.Sprintf("%03d_%s", mig.Version, mig.Name)
	if line != driver.CoreLine {
		label = line + "/" + label
	}
	err := driver.WithTx(ctx, m.drv.Executor(), func(tx driver.ExecutorTx) error {
		if err := tx.MigrationLock(ctx); err != nil {
			return err
		}
		if err := tx.MigrationTableEnsure(ctx); err != nil {
			return err
		}
		rows, err := tx.MigrationGetAll(ctx)
		if err != nil {
			return err
		}
		present := false
		for _, r := range rows {
			present = present || (r.Line == line && r.Version == mig.Version)
		}
		if present == up {
			return nil
		}
		if up {
			if err := tx.Exec(ctx, mig.Up); err != nil {
				return fmt.Errorf("migration %s up: %w", label, err)
			}
			if err := tx.MigrationInsert(ctx, &driver.MigrationInsertParams{Line: line, Version: mig.Version, Name: mig.Name}); err != nil {
				return err
			}
		} else {
			if err := tx.Exec(ctx, mig.Down); err != nil {
				return fmt.Errorf("migration %s down: %w", label, err)
			}
			if err := tx.MigrationDelete(ctx, line, mig.Version); err != nil {
				return err
			}
		}
		did = true
		return nil
	})
	if err != nil || !did {
		return nil, err
	}
	direction := "up"
	if !up {
		direction = "down"
	}
	applied := &Applied{Line: line, Version: mig.Version, Name: mig.Name, Duration: time.Since(start)}
	m.logger.Info("migration applied", "direction", direction, "line", line, "version", mig.Version, "name", mig.Name, "duration", applied.Duration)
	return applied, nil
}

// ErrNoScript is returned by Script for a driver that cannot print its migrations as a script
// (SQLite: apply them with Up).
var ErrNoScript = errors.New("this driver's migrations cannot be printed as a script; apply them with `migrate up`")

// Script returns the SQL that takes line (CoreLine when empty) from version from to version to,
// for a DBA to review and apply: each migration in its own transaction, with the schema filled in
// and the version table kept as Up and Down keep it. from < to applies from+1..to; from > to
// reverts from..to+1, newest first; a negative to is the newest version this binary knows. It
// reads nothing from the database.
func (m *Migrator) Script(line string, from, to int) (string, error) {
	if line == "" {
		line = driver.CoreLine
	}
	scripter, ok := m.drv.(driver.MigrationScripter)
	if !ok {
		return "", ErrNoScript
	}
	lines, err := migrationsOf(m.drv, []string{line})
	if err != nil {
		return "", err
	}
	migrations := lines[0].migrations
	latest := 0
	if len(migrations) > 0 {
		latest = migrations[len(migrations)-1].Version
	}
	if to < 0 {
		to = latest
	}
	if from < 0 || from > latest || to > latest {
		return "", fmt.Errorf("versions of line %s run from 0 to %d; got --from %d --to %d", line, latest, from, to)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "-- commandbus migrations of line %s, version %d to %d, for %s\n", line, from, to, m.drv.Name())
	write := func(mig driver.Migration, up bool) {
		direction, body := "up", mig.Up
		if !up {
			direction, body = "down", mig.Down
		}
		// The version is recorded first: it creates the schema the migration's statements need.
		fmt.Fprintf(&b, "\n-- %03d_%s %s\nBEGIN;\n%s\n", mig.Version, mig.Name, direction, scripter.MigrationRecordSQL(line, mig.Version, mig.Name, up))
		fmt.Fprintf(&b, "%s\nCOMMIT;\n", strings.TrimRight(strings.TrimSpace(body), ";")+";")
	}
	if from <= to {
		for _, mig := range migrations {
			if mig.Version > from && mig.Version <= to {
				write(mig, true)
			}
		}
	} else {
		for i := len(migrations) - 1; i >= 0; i-- {
			if mig := migrations[i]; mig.Version <= from && mig.Version > to {
				write(mig, false)
			}
		}
	}
	return b.String(), nil
}
