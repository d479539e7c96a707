package main

import (
	"fmt"
	"log/slog"
	"os"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/commandbus/commandbus/migrate"
)

func newMigrateCommand() *cobra.Command {
	var db databaseFlags
	cmd := &cobra.Command{
		Use:   "migrate up|down|status",
		Short: "Apply, revert or show schema migrations",
		Long: "migrate manages the commandbus schema. `up` applies every pending migration, `down` reverts\n" +
			"the newest one (or --steps N, 0 for all), `status` lists migrations and whether they are applied.",
		Args:      cobra.ExactArgs(1),
		ValidArgs: []string{"up", "down", "status"},
	}
	var steps int
	cmd.Flags().IntVar(&steps, "steps", 1, "migrations to revert with down (0: all)")
	db.register(cmd, "")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		ctx := cmd.Context()
		database, err := openDatabase(ctx, db.url, db.schema, 2)
		if err != nil {
			return err
		}
		defer database.close()
		logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
		m := migrate.New(database, logger)
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
				fmt.Fprintf(out, "applied %03d_%s in %s\n", a.Version, a.Name, a.Duration.Round(1e6))
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
				fmt.Fprintf(out, "reverted %03d_%s\n", a.Version, a.Name)
			}
		case "status":
			status, err := m.Status(ctx)
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "VERSION\tNAME\tAPPLIED")
			for _, s := range status {
				applied := "pending"
				if s.AppliedAt != nil {
					applied = s.AppliedAt.UTC().Format("2006-01-02 15:04:05Z")
				}
				fmt.Fprintf(tw, "%03d\t%s\t%s\n", s.Version, s.Name, applied)
			}
			return tw.Flush()
		default:
			return fmt.Errorf("unknown action %q: use up, down or status", args[0])
		}
		return nil
	}
	return cmd
}
