package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/cli"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/driver/sqlitedriver"
	"github.com/commandbus/commandbus/internal/dbtest"
	"github.com/commandbus/commandbus/migrate"
)

// cliDatabase is a database the tests give the command line (args) and read back (drv).
type cliDatabase struct {
	args []string
	drv  driver.Driver
}

// eachCLIDatabase runs fn on a fresh, migrated PostgreSQL schema and a fresh SQLite file.
func eachCLIDatabase(t *testing.T, fn func(t *testing.T, db cliDatabase)) {
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		drv := dbtest.Postgres(t)
		fn(t, cliDatabase{args: []string{"--database", dbtest.DatabaseURL(), "--schema", drv.Schema()}, drv: drv})
	})
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "bulk.db")
		drv, err := sqlitedriver.Open(path, nil)
		require.NoError(t, err)
		t.Cleanup(func() { _ = drv.Close() })
		_, err = migrate.New(drv, nil).Up(context.Background())
		require.NoError(t, err)
		fn(t, cliDatabase{args: []string{"--database", "sqlite://" + path}, drv: drv})
	})
}

// runExit executes args and returns the exit code the binary would end with.
func runExit(t *testing.T, args ...string) (result, int) {
	t.Helper()
	res := execute(context.Background(), args...)
	return res, cli.ExitCode(res.err)
}

// parkWithCodes sends one command per error code to domain fx, whose handler fails permanently
// with that code, and waits until they are all parked. It returns the ids by code.
func parkWithCodes(t *testing.T, drv driver.Driver, codes ...string) map[string][]uuid.UUID {
	t.Helper()
	handlers := commandbus.NewHandlers()
	commandbus.AddHandler(handlers, "fx", commandbus.HandlerFunc[bookFx](func(ctx context.Context, cmd *commandbus.Command[bookFx]) (any, error) {
		code, _, _ := strings.Cut(cmd.Args.PaymentID, "/")
		return nil, commandbus.Permanent(code, errors.New("refused"))
	}))
	client, err := commandbus.NewClient(drv, &commandbus.Config{Handlers: handlers, Logger: slog.New(slog.DiscardHandler),
		FetchPollInterval: commandbus.Duration(20 * time.Millisecond)})
	require.NoError(t, err)
	ids := map[string][]uuid.UUID{}
	for i, code := range codes {
		id, err := client.Send(context.Background(), "fx", bookFx{PaymentID: fmt.Sprintf("%s/%d", code, i)}, nil)
		require.NoError(t, err)
		ids[code] = append(ids[code], id.ID)
	}
	require.NoError(t, client.Start(context.Background()))
	defer func() { require.NoError(t, client.Stop(context.Background())) }()
	require.Eventually(t, func() bool {
		rows, err := client.TSQ().List(context.Background(), commandbus.TSQFilter{})
		return err == nil && len(rows) == len(codes)
	}, 15*time.Second, 10*time.Millisecond)
	return ids
}

func commandStatus(t *testing.T, drv driver.Driver, id uuid.UUID) *driver.CommandRow {
	t.Helper()
	row, err := drv.Executor().CommandGetByID(context.Background(), id)
	require.NoError(t, err)
	return row
}

// bulkReport is the -o json output of an action over many.
type bulkReport struct {
	Action  string
	DryRun  bool
	Matched int
	Done    int
	Failed  int
	Items   []struct {
		ID     uuid.UUID
		Status string
	}
}

func TestBulkTSQAndDLQActions(t *testing.T) {
	t.Parallel()
	eachCLIDatabase(t, func(t *testing.T, db cliDatabase) {
		ids := parkWithCodes(t, db.drv, "PAIR_SUSPENDED", "PAIR_SUSPENDED", "PAIR_SUSPENDED", "LIMIT", "LIMIT")
		with := func(args ...string) []string { return append(args, db.args...) }
		all := append(append([]uuid.UUID{}, ids["PAIR_SUSPENDED"]...), ids["LIMIT"]...)
		requireStatus := func(want driver.CommandStatus, which []uuid.UUID, msg string) {
			t.Helper()
			for _, id := range which {
				require.Equal(t, want, commandStatus(t, db.drv, id).Status, msg)
			}
		}

		res, code := runExit(t, with("tsq", "retry", "--domain", "fx", "--reason", "r")...)
		require.Equal(t, cli.ExitUsage, code, "acting on many needs --yes: %v", res.err)
		require.ErrorContains(t, res.err, "--dry-run")
		requireStatus(driver.CommandStatusInTSQ, all, "without --yes nothing changes")

		var report bulkReport
		out := run(t, with("tsq", "retry", "--error-code", "PAIR_SUSPENDED", "--dry-run", "--reason", "r", "-o", "json")...)
		require.NoError(t, json.Unmarshal([]byte(out), &report), out)
		require.True(t, report.DryRun)
		require.Equal(t, 3, report.Matched)
		require.Zero(t, report.Done)
		table := run(t, with("tsq", "retry", "--error-code", "PAIR_SUSPENDED", "--dry-run", "--reason", "r")...)
		require.Contains(t, table, "would retry "+ids["PAIR_SUSPENDED"][0].String())
		require.Contains(t, table, "3 would be retried; nothing changed")
		requireStatus(driver.CommandStatusInTSQ, all, "a dry run changes nothing")

		out = run(t, with("tsq", "retry", "--older-than", "1h", "--yes", "--reason", "r")...)
		require.Contains(t, out, "nothing matches", "nothing was parked an hour ago")
		requireStatus(driver.CommandStatusInTSQ, all, "")

		out = run(t, with("tsq", "cancel", "--error-code", "PAIR_SUSPENDED", "--domain", "fx", "--older-than", "1ns",
			"--yes", "--reason", "pair closed", "--actor", "ops:kim", "-o", "json")...)
		require.NoError(t, json.Unmarshal([]byte(out), &report), out)
		require.Equal(t, 3, report.Done)
		require.Zero(t, report.Failed)
		for _, id := range ids["PAIR_SUSPENDED"] {
			row := commandStatus(t, db.drv, id)
			require.Equal(t, driver.CommandStatusCancelled, row.Status)
			var cancels int
			for _, e := range row.Audit {
				if e.Event == "TSQ_CANCEL" {
					cancels++
					require.Equal(t, "ops:kim", e.Actor)
					require.Equal(t, "pair closed", e.Reason)
				}
			}
			require.Equal(t, 1, cancels, "each item is audited once, with the one reason")
		}
		requireStatus(driver.CommandStatusInTSQ, ids["LIMIT"], "the other error code is left alone")

		res, code = runExit(t, with("dlq", "resubmit", "--error-code", "LIMIT", "--reason", "r")...)
		require.Equal(t, cli.ExitUsage, code)
		requireStatus(driver.CommandStatusInTSQ, ids["LIMIT"], "without --yes nothing changes")
		out = run(t, with("dlq", "resubmit", "--error-code", "LIMIT", "--dry-run", "--reason", "r")...)
		require.Contains(t, out, "2 would be resubmitted")
		requireStatus(driver.CommandStatusInTSQ, ids["LIMIT"], "a dry run changes nothing")
		out = run(t, with("dlq", "resubmit", "--error-code", "LIMIT", "--yes", "--reason", "limit raised")...)
		require.Contains(t, out, "2 resubmitted, 0 failed, of 2 matching")
		requireStatus(driver.CommandStatusPending, ids["LIMIT"], "resubmitted")

		res, code = runExit(t, with("tsq", "retry", ids["LIMIT"][0].String(), "--reason", "again")...)
		require.Equal(t, cli.ExitConflict, code, "a pending command is not in the TSQ: %v", res.err)
		res, code = runExit(t, with("tsq", "retry", uuid.NewString(), "--reason", "r")...)
		require.Equal(t, cli.ExitNotFound, code, "%v", res.err)
		res, code = runExit(t, with("tsq", "retry", ids["LIMIT"][0].String(), "--domain", "fx", "--reason", "r")...)
		require.Equal(t, cli.ExitUsage, code, "an ID and filters: %v", res.err)
	})
}

func TestBulkExecutionActions(t *testing.T) {
	t.Parallel()
	eachCLIDatabase(t, func(t *testing.T, db cliDatabase) {
		with := func(args ...string) []string { return append(args, db.args...) }
		var ids []uuid.UUID
		for i := range 3 {
			out := run(t, with("executions", "start", "workflow", "CustomerOnboarding", "--business-key", fmt.Sprint("app-", i),
				"--input", `{"name":"Ada","email":"ada@example.com","country":"GB"}`)...)
			id, err := uuid.Parse(strings.TrimSpace(out[strings.LastIndex(out, ":")+1:]))
			require.NoError(t, err, out)
			ids = append(ids, id)
		}
		requireStatus := func(want driver.ExecutionStatus, msg string) {
			t.Helper()
			for _, id := range ids {
				row, err := db.drv.Executor().ExecutionGet(context.Background(), id)
				require.NoError(t, err)
				require.Equal(t, want, row.Status, msg)
			}
		}
		res, code := runExit(t, with("executions", "suspend", "--model", "workflow", "--reason", "r")...)
		require.Equal(t, cli.ExitUsage, code, "%v", res.err)
		requireStatus(driver.ExecutionPending, "without --yes nothing changes")
		out := run(t, with("executions", "suspend", "--model", "workflow", "--type", "CustomerOnboarding", "--dry-run", "--reason", "r")...)
		require.Contains(t, out, "3 would be suspended")
		requireStatus(driver.ExecutionPending, "a dry run changes nothing")
		out = run(t, with("executions", "suspend", "--model", "workflow", "--yes", "--reason", "fraud sweep")...)
		require.Contains(t, out, "3 suspended, 0 failed")
		requireStatus(driver.ExecutionSuspended, "suspended")
		out = run(t, with("tsq", "processes", "retry", "--yes", "--reason", "r")...)
		require.Contains(t, out, "nothing matches", "no process waits in the troubleshooting queue")
		out = run(t, with("executions", "resume", "--type", "CustomerOnboarding", "--yes", "--reason", "cleared")...)
		require.Contains(t, out, "3 resumed")
		requireStatus(driver.ExecutionPending, "resumed")
	})
}

// Listings show at most --limit rows and say when more match; --all follows the pages.
func TestListingsFollowPages(t *testing.T) {
	t.Parallel()
	eachCLIDatabase(t, func(t *testing.T, db cliDatabase) {
		with := func(args ...string) []string { return append(args, db.args...) }
		ids := parkWithCodes(t, db.drv, "A", "A", "A", "A", "A")
		var rows []tsqRow
		res := execute(context.Background(), with("tsq", "list", "--limit", "2", "-o", "json")...)
		require.NoError(t, res.err)
		require.NoError(t, json.Unmarshal([]byte(res.stdout), &rows))
		require.Len(t, rows, 2)
		require.Contains(t, res.stderr, "more than 2 rows match", "a cut listing says so")
		res = execute(context.Background(), with("tsq", "list", "--limit", "2", "--all", "-o", "json")...)
		require.NoError(t, res.err)
		require.NoError(t, json.Unmarshal([]byte(res.stdout), &rows))
		got := make([]uuid.UUID, len(rows))
		for i, r := range rows {
			got[i] = r.ID
		}
		require.ElementsMatch(t, ids["A"], got, "every row once")
		require.Empty(t, res.stderr)
		_, code := runExit(t, with("tsq", "list", "--limit", "0")...)
		require.Equal(t, cli.ExitUsage, code)

		// The dead-letter queue pages the same way, by when each command was parked.
		var parked []*commandbus.DLQEntry
		res = execute(context.Background(), with("dlq", "list", "--limit", "2", "-o", "json")...)
		require.NoError(t, res.err)
		require.NoError(t, json.Unmarshal([]byte(res.stdout), &parked))
		require.Len(t, parked, 2)
		require.Contains(t, res.stderr, "more than 2 rows match")
		res = execute(context.Background(), with("dlq", "list", "--limit", "2", "--all", "-o", "json")...)
		require.NoError(t, res.err)
		require.NoError(t, json.Unmarshal([]byte(res.stdout), &parked))
		got = got[:0]
		for _, p := range parked {
			got = append(got, p.CommandID)
		}
		require.ElementsMatch(t, ids["A"], got, "every parked command once")
		require.Empty(t, res.stderr)
		_, code = runExit(t, with("dlq", "list", "--limit", "1001")...)
		require.Equal(t, cli.ExitUsage, code)
	})
}
