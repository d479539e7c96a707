// Package sqlitedriver is the embedded SQLite driver (placeholder until implemented).
package sqlitedriver

import (
	"database/sql"
	"errors"

	"github.com/commandbus/commandbus/driver"
)

// Config configures the driver.
type Config struct{}

// Driver is the SQLite driver.
type Driver struct{ driver.Driver }

// Open opens (creating if needed) the database file at path.
func Open(path string, config *Config) (*Driver, error) {
	return nil, errors.New("sqlitedriver: not implemented yet")
}

// Close closes the database.
func (d *Driver) Close() error { return nil }

// DB returns the writer database handle.
func (d *Driver) DB() *sql.DB { return nil }
