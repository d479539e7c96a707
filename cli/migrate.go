package cli

import (
	"fmt"
	"log/slog"
	"strings"
	"text/tabwriter"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/driver/pgdriver"
	"github.com/commandbus/commandbus/migrate"
)

// newMigrateCommand is `migrate up|down|status|sql` over every registered migration line.
func newMigrateCommand() *cobra.Command {
	var db DatabaseFlags
	cmd := &cobra.Command{
		Use:   "migrate up|down|status|sql",
		Short: "Apply, revert, show or print schema migrations",
		Long: "migrate manages the schema: the core line (commandbus's own tables) and the lines the application\n" +
			"registers (its business tables). `up` applies every pending migration of every line. `down` reverts\n" +
			"the newest one, --steps N the newest N, --all every one (application lines before the core). `status`\n" +
			"lists migrations and whether they are applied, and exits 5 when some are pending. `sql --from N --to M`\n" +
			"prints the SQL that takes a line (--line, default core) from version N to M, schema filled in, each\n" +
			"migration in its own transaction with the version table kept, for a DBA's pipeline; it connects to\n" +
			"nothing (PostgreSQL). --dry-run with up or down lists what would be done and changes nothing. --line\n" +
			"restricts any of them to lines. Instances never change the schema themselves: they refuse to start\n" +
			"until `migrate up` has run.",
		Example: "  commandbus migrate up --database postgres://app@db/payments\n" +
			"  commandbus migrate status --database postgres://app@db/payments || echo pending\n" +
			"  commandbus migrate sql --from 0 --to 3 --schema payments_cb > migrations.sql\n" +
			"  commandbus migrate down --all --database sqlite://commandbus.db",
		Args:      cobra.ExactArgs(1),
		ValidArgs: []string{"up", "down", "status", "sql"},
	}
	var steps, from, to int
	var all, dryRun bool
	var lines []string
	cmd.Flags().IntVar(&steps, "steps", 1, "down: how many of the newest migrations to revert (at least 1; --all for every one)")
	cmd.Flags().BoolVar(&all, "all", false, "down: revert every migration (drops every commandbus table and its data)")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "up, down: list what would be applied or reverted and change nothing")
	cmd.Flags().IntVar(&from, "from", 0, "sql: the version the schema is at (0: empty)")
	cmd.Flags().IntVar(&to, "to", -1, "sql: the version to take it to (default: the newest this binary knows)")
	cmd.Flags().StringSliceVar(&lines, "line", nil, "only these migration lines ("+strings.Join(migrate.Lines(), ", ")+"); default: all (sql: core)")
	db.Register(cmd, "")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		ctx := cmd.Context()
		action := args[0]
		switch action {
		case "up", "down", "status", "sql":
		default:
			return usageErrorf("unknown action %q: use up, down, status or sql", action)
		}
		if action == "down" {
			switch {
			case all && cmd.Flags().Changed("steps"):
				return usageErrorf("--all and --steps contradict each other; give one")
			case !all && steps < 1:
				return usageErrorf("--steps must be at least 1; to revert every migration pass --all")
			}
		} else if all || cmd.Flags().Changed("steps") {
			return usageErrorf("--steps and --all apply to down only")
		}
		if dryRun && action != "up" && action != "down" {
			return usageErrorf("--dry-run applies to up and down only")
		}
		if action != "sql" && (cmd.Flags().Changed("from") || cmd.Flags().Changed("to")) {
			return usageErrorf("--from and --to apply to sql only")
		}
		logger, err := Logger(cmd, cmd.ErrOrStderr(), LogOptions{Level: slog.LevelInfo, Format: LogFormatText})
		if err != nil {
			return err
		}
		out := cmd.OutOrStdout()
		if action == "sql" {
			return printMigrationSQL(cmd, &db, lines, from, to)
		}
		database, err := OpenDatabase(ctx, db.URL, db.Schema, 2)
		if err != nil {
			return err
		}
		defer database.Close()
		m := migrate.New(database, logger)
		if len(lines) > 0 {
			m = m.Only(lines...)
		}
		if dryRun {
			return printMigrationPlan(cmd, m, action, steps, all)
		}
		switch action {
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
			n := steps
			if all {
				n = 0 // Down reverts every migration for 0
			}
			reverted, err := m.Down(ctx, n)
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
			pending := 0
			for _, s := range status {
				applied := "pending"
				if s.AppliedAt != nil {
					applied = s.AppliedAt.UTC().Format("2006-01-02 15:04:05Z")
				} else {
					pending++
				}
				fmt.Fprintf(tw, "%s\t%03d\t%s\t%s\n", s.Line, s.Version, s.Name, applied)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			if pending > 0 {
				return &ExitError{Code: ExitPending, Err: fmt.Errorf("%d migrations pending: run `commandbus migrate up`", pending)}
			}
		}
		return nil
	}
	return cmd
}

// printMigrationPlan lists what up or down would do, changing nothing.
func printMigrationPlan(cmd *cobra.Command, m *migrate.Migrator, action string, steps int, all bool) error {
	status, err := m.Status(cmd.Context())
	if err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	var plan []migrate.Status
	if action == "up" {
		for _, s := range status {
			if !s.Applied {
				plan = append(plan, s)
			}
		}
	} else {
		for i := len(status) - 1; i >= 0 && (all || len(plan) < steps); i-- {
			if status[i].Applied {
				plan = append(plan, status[i])
			}
		}
	}
	verb := map[string]string{"up": "apply", "down": "revert"}[action]
	if len(plan) == 0 {
		fmt.Fprintf(out, "nothing to %s\n", verb)
	}
	for _, s := range plan {
		fmt.Fprintf(out, "would %s %s\n", verb, migrationLabel(s.Line, s.Version, s.Name))
	}
	fmt.Fprintln(out, "dry run: nothing changed")
	return nil
}

// printMigrationSQL prints the script of `migrate sql`. It opens no connection: a PostgreSQL
// driver is built on a pool that is never used.
func printMigrationSQL(cmd *cobra.Command, db *DatabaseFlags, lines []string, from, to int) error {
	if len(lines) > 1 {
		return usageErrorf("sql prints one line at a time; got --line %s", strings.Join(lines, ","))
	}
	line := driver.CoreLine
	if len(lines) == 1 {
		line = lines[0]
	}
	url := db.URL
	if url == "" {
		url = "postgres://localhost/commandbus" // never connected: only the schema matters
	}
	kind, err := DatabaseKind(url)
	if err != nil {
		return err
	}
	if kind != DatabasePostgres {
		return usageErrorf("sql prints PostgreSQL scripts; SQLite is migrated with `commandbus migrate up`")
	}
	cfg, err := pgxpool.ParseConfig(strings.TrimSpace(url))
	if err != nil {
		return usageErrorf("parsing --database %s: %s", Redact(url), redactSecrets(err.Error(), url))
	}
	pool, err := pgxpool.NewWithConfig(cmd.Context(), cfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	drv, err := pgdriver.New(pool, &pgdriver.Config{Schema: db.Schema})
	if err != nil {
		return usageErrorf("--schema: %v", err)
	}
	script, err := migrate.New(drv, nil).Script(line, from, to)
	if err != nil {
		return usageErrorf("%v", err)
	}
	_, err = fmt.Fprint(cmd.OutOrStdout(), script)
	return err
}

// migrationLabel names a migration: 001_command_bus for the core line, payments/001_payments for
// another.
func migrationLabel(line string, version int, name string) string {
	if line == driver.CoreLine {
		return fmt.Sprintf("%03d_%s", version, name)
	}
	return fmt.Sprintf("%s/%03d_%s", line, version, name)
}
