// Package migrate applies the embedded, versioned schema migrations of a commandbus driver.
//
// Versions are the same numbers on every driver. Each migration runs in its own transaction under
// a lock, so two processes migrating at once apply each version exactly once.
//
//	m := migrate.New(drv, logger)
//	if _, err := m.Up(ctx); err != nil { ... }
package migrate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/commandbus/commandbus/driver"
)

// ErrSchemaNewer means the database was migrated by a newer binary; running this one against it
// could corrupt data, so the caller must upgrade.
var ErrSchemaNewer = errors.New("database schema is newer than this binary")

// ErrSchemaOutdated means migrations are pending.
var ErrSchemaOutdated = errors.New("database schema is out of date")

// Migrator applies migrations.
type Migrator struct {
	drv    driver.Driver
	logger *slog.Logger
}

// New returns a migrator for drv. A nil logger discards logs.
func New(drv driver.Driver, logger *slog.Logger) *Migrator {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Migrator{drv: drv, logger: logger}
}

// Applied describes a migration applied or reverted by Up or Down.
type Applied struct {
	Version  int
	Name     string
	Duration time.Duration
}

// Status is one migration and whether the database has it.
type Status struct {
	Version   int
	Name      string
	Applied   bool
	AppliedAt *time.Time
}

// Up applies every pending migration in order and returns what it applied.
func (m *Migrator) Up(ctx context.Context) ([]Applied, error) {
	var applied []Applied
	for _, mig := range m.drv.Migrations() {
		done, err := m.step(ctx, mig, true)
		if err != nil {
			return applied, err
		}
		if done != nil {
			applied = append(applied, *done)
		}
	}
	return applied, nil
}

// Down reverts the newest steps migrations (all of them when steps <= 0).
func (m *Migrator) Down(ctx context.Context, steps int) ([]Applied, error) {
	current, err := m.currentVersions(ctx)
	if err != nil {
		return nil, err
	}
	migrations := m.drv.Migrations()
	var reverted []Applied
	for i := len(migrations) - 1; i >= 0; i-- {
		if steps > 0 && len(reverted) >= steps {
			break
		}
		if !current[migrations[i].Version] {
			continue
		}
		done, err := m.step(ctx, migrations[i], false)
		if err != nil {
			return reverted, err
		}
		if done != nil {
			reverted = append(reverted, *done)
		}
	}
	return reverted, nil
}

// Status lists every known migration with its state, plus versions the database has that this
// binary does not know (those make CheckVersion fail).
func (m *Migrator) Status(ctx context.Context) ([]Status, error) {
	rows, err := m.drv.Executor().MigrationGetAll(ctx)
	if err != nil {
		return nil, err
	}
	byVersion := map[int]*driver.MigrationRow{}
	for _, r := range rows {
		byVersion[r.Version] = r
	}
	var out []Status
	for _, mig := range m.drv.Migrations() {
		s := Status{Version: mig.Version, Name: mig.Name}
		if r, ok := byVersion[mig.Version]; ok {
			s.Applied = true
			at := r.AppliedAt
			s.AppliedAt = &at
			delete(byVersion, mig.Version)
		}
		out = append(out, s)
	}
	for _, r := range rows {
		if _, unknown := byVersion[r.Version]; unknown {
			at := r.AppliedAt
			out = append(out, Status{Version: r.Version, Name: r.Name + " (unknown to this binary)", Applied: true, AppliedAt: &at})
		}
	}
	return out, nil
}

// CheckVersion returns nil when the database has exactly the migrations this binary knows,
// ErrSchemaNewer when it has more, and ErrSchemaOutdated when some are pending.
func CheckVersion(ctx context.Context, drv driver.Driver) error {
	rows, err := drv.Executor().MigrationGetAll(ctx)
	if err != nil {
		return fmt.Errorf("reading schema version: %w", err)
	}
	known := drv.Migrations()
	latest := 0
	if len(known) > 0 {
		latest = known[len(known)-1].Version
	}
	dbVersion := 0
	for _, r := range rows {
		dbVersion = max(dbVersion, r.Version)
	}
	switch {
	case dbVersion > latest:
		return fmt.Errorf("%w: the database is at version %d but this binary knows versions up to %d; upgrade commandbus before running it against this database", ErrSchemaNewer, dbVersion, latest)
	case len(rows) < len(known):
		return fmt.Errorf("%w: %d of %d migrations applied; run `commandbus migrate up` (or migrate.New(driver, nil).Up)", ErrSchemaOutdated, len(rows), len(known))
	}
	return nil
}

func (m *Migrator) currentVersions(ctx context.Context) (map[int]bool, error) {
	rows, err := m.drv.Executor().MigrationGetAll(ctx)
	if err != nil {
		return nil, err
	}
	out := map[int]bool{}
	for _, r := range rows {
		out[r.Version] = true
	}
	return out, nil
}

// step applies (up) or reverts (down) one migration in a transaction, unless another migrator
// already did. It returns nil, nil when there was nothing to do.
func (m *Migrator) step(ctx context.Context, mig driver.Migration, up bool) (*Applied, error) {
	start := time.Now()
	var did bool
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
			present = present || r.Version == mig.Version
		}
		if present == up {
			return nil
		}
		if up {
			if err := tx.Exec(ctx, mig.Up); err != nil {
				return fmt.Errorf("migration %03d_%s up: %w", mig.Version, mig.Name, err)
			}
			if err := tx.MigrationInsert(ctx, &driver.MigrationInsertParams{Version: mig.Version, Name: mig.Name}); err != nil {
				return err
			}
		} else {
			if err := tx.Exec(ctx, mig.Down); err != nil {
				return fmt.Errorf("migration %03d_%s down: %w", mig.Version, mig.Name, err)
			}
			if err := tx.MigrationDelete(ctx, mig.Version); err != nil {
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
	applied := &Applied{Version: mig.Version, Name: mig.Name, Duration: time.Since(start)}
	m.logger.Info("migration applied", "direction", direction, "version", mig.Version, "name", mig.Name, "duration", applied.Duration)
	return applied, nil
}
