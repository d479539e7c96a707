package cli

import (
	"fmt"
	"log/slog"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/migrate"
)

// newMigrateCommand is `migrate up|down|status` over every registered migration line.
func newMigrateCommand() *cobra.Command {
	var db DatabaseFlags
	cmd := &cobra.Command{
		Use:   "migrate up|down|status",
		Short: "Apply, revert or show schema migrations",
		Long: "migrate manages the schema: the core line (commandbus's own tables) and the lines the application\n" +
			"registers (its business tables). `up` applies every pending migration of every line, `down` reverts the\n" +
			"newest one (or --steps N, 0 for all; application lines before the core), `status` lists migrations\n" +
			"and whether they are applied. --line restricts any of them to one line. Instances never change the\n" +
			"schema themselves: they refuse to start until `migrate up` has run.",
		Args:      cobra.ExactArgs(1),
		ValidArgs: []string{"up", "down", "status"},
	}
	var steps int
	var lines []string
	cmd.Flags().IntVar(&steps, "steps", 1, "migrations to revert with down (0: all)")
	cmd.Flags().StringSliceVar(&lines, "line", nil, "only these migration lines ("+strings.Join(migrate.Lines(), ", ")+"); default: all")
	db.Register(cmd, "")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		ctx := cmd.Context()
		database, err := OpenDatabase(ctx, db.URL, db.Schema, 2)
		if err != nil {
			return err
		}
		defer database.Close()
		logger, err := Logger(cmd, cmd.ErrOrStderr(), LogOptions{Level: slog.LevelInfo, Format: LogFormatText})
		if err != nil {
			return err
		}
		m := migrate.New(database, logger)
		if len(lines) > 0 {
			m = m.Only(lines...)
		}
		out := cmd.OutOrStdout()
		switch args[0] {
		case "up":
			applied, err := m.Up(ctx)
			if err != nil {
				return err
			}
			if len(applied) == 0 {
				fmt.Fprintln(out, "schema is up to date")
			}
			for _, a := range applied {
				fmt.Fprintf(out, "applied %s in %s\n", migrationLabel(a.Line, a.Version, a.Name), a.Duration.Round(1e6))
			}
		case "down":
			reverted, err := m.Down(ctx, steps)
			if err != nil {
				return err
			}
			if len(reverted) == 0 {
				fmt.Fprintln(out, "nothing to revert")
			}
			for _, a := range reverted {
				fmt.Fprintf(out, "reverted %s\n", migrationLabel(a.Line, a.Version, a.Name))
			}
		case "status":
			status, err := m.Status(ctx)
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "LINE\tVERSION\tNAME\tAPPLIED")
			for _, s := range status {
				applied := "pending"
				if s.AppliedAt != nil {
					applied = s.AppliedAt.UTC().Format("2006-01-02 15:04:05Z")
				}
				fmt.Fprintf(tw, "%s\t%03d\t%s\t%s\n", s.Line, s.Version, s.Name, applied)
			}
			return tw.Flush()
		default:
			return fmt.Errorf("unknown action %q: use up, down or status", args[0])
		}
		return nil
	}
	return cmd
}

// migrationLabel names a migration: 001_command_bus for the core line, payments/001_payments for
// another.
func migrationLabel(line string, version int, name string) string {
	if line == driver.CoreLine {
		return fmt.Sprintf("%03d_%s", version, name)
	}
	return fmt.Sprintf("%s/%03d_%s", line, version, name)
}
