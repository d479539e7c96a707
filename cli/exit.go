package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/migrate"
)

// The exit codes of the commands, for scripts and runbooks. ExitCode maps an error to one.
const (
	ExitOK       = 0 // success
	ExitFailure  = 1 // any other failure: the database unreachable, an action failed on some items
	ExitUsage    = 2 // a usage error: unknown command or flag, missing or malformed argument or flag value
	ExitNotFound = 3 // the command, execution or parked entry named does not exist
	ExitConflict = 4 // it exists but is not in a state that allows the action (already retried, say)
	ExitPending  = 5 // migrate status: migrations are pending (the schema is older than the binary)
	ExitSchema   = 6 // the database is not migrated, or older than the binary: run `migrate up`
)

// ExitCodesHelp documents the exit codes, for --help and the README.
const ExitCodesHelp = `Exit codes:
  0  success
  1  failure (database unreachable, an action failed on some items, ...)
  2  usage error (unknown command or flag, missing or malformed argument)
  3  not found (no command, execution or parked entry with that id)
  4  conflict (the item is not in a state that allows the action)
  5  migrate status: migrations are pending
  6  the database is not migrated or older than this binary: run ` + "`commandbus migrate up`"

// ExitError carries an exit code with the error it wraps.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string { return e.Err.Error() }

// Unwrap returns the wrapped error.
func (e *ExitError) Unwrap() error { return e.Err }

// usageErrorf is a usage error (exit code 2) with a formatted message.
func usageErrorf(format string, args ...any) error {
	return &ExitError{Code: ExitUsage, Err: fmt.Errorf(format, args...)}
}

// cobra's own usage errors are plain errors; these are their message prefixes.
var cobraUsagePrefixes = []string{"unknown command", "unknown flag", "unknown shorthand flag", "required flag(s)",
	"accepts ", "requires at least", "requires at most", "received ", "invalid argument", "flag needs an argument",
	"if any flags in the group", "none of the others can be"}

// ExitCode is the process exit code for err returned by a command: nil is 0, then, in order, an
// ExitError's code, 6 for an unmigrated schema, 3 for not found, 4 for a conflict, 2 for a
// validation or usage error, else 1.
func ExitCode(err error) int {
	if err == nil {
		return ExitOK
	}
	var exit *ExitError
	if errors.As(err, &exit) {
		return exit.Code
	}
	var schema *SchemaError
	if errors.As(err, &schema) || errors.Is(err, migrate.ErrSchemaOutdated) {
		return ExitSchema
	}
	if errors.Is(err, driver.ErrNotFound) {
		return ExitNotFound
	}
	if errors.Is(err, driver.ErrConflict) {
		return ExitConflict
	}
	var invalid *commandbus.ValidationError
	if errors.As(err, &invalid) {
		return ExitUsage
	}
	msg := err.Error()
	for _, p := range cobraUsagePrefixes {
		if strings.HasPrefix(msg, p) {
			return ExitUsage
		}
	}
	return ExitFailure
}

// PrepareRoot makes root's flag errors usage errors (exit code 2) and adds the exit codes to
// every command's --help. Call it once the commands are added.
//
// It also adds --log-level and --log-format for every command (see Logger).
func PrepareRoot(root *cobra.Command) {
	addLogFlags(root)
	if root.PersistentPreRunE == nil && root.PersistentPreRun == nil {
		// Commands that log nothing still refuse a bad --log-level or --log-format.
		root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
			_, err := Logger(cmd, io.Discard, LogOptions{})
			return err
		}
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return &ExitError{Code: ExitUsage, Err: err}
	})
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if !strings.Contains(c.Long, "Exit codes:") {
			long := c.Long
			if long == "" {
				long = c.Short
			}
			c.Long = long + "\n\n" + ExitCodesHelp
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

// writeJSONLines prints one compact JSON value per line.
func writeJSONLines[T any](out io.Writer, rows []T) error {
	enc := json.NewEncoder(out)
	for _, r := range rows {
		if err := enc.Encode(r); err != nil {
			return err
		}
	}
	return nil
}
