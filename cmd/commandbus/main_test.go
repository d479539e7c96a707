package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/cli"
	"github.com/commandbus/commandbus/driver/sqlitedriver"
	"github.com/commandbus/commandbus/internal/dbtest"
	"github.com/commandbus/commandbus/migrate"
	"github.com/commandbus/commandbus/tcc"
)

// result is what one in-process run of the binary printed and returned.
type result struct {
	stdout, stderr string
	err            error
}

// execute runs the commandbus command line in-process with args.
func execute(ctx context.Context, args ...string) result {
	var stdout, stderr bytes.Buffer
	root := newRootCommand()
	root.SetArgs(args)
	root.SetOut(&stdout)
	root.SetErr(&stderr)
	err := root.ExecuteContext(ctx)
	return result{stdout: stdout.String(), stderr: stderr.String(), err: err}
}

// run executes args and fails the test unless the command succeeds.
func run(t *testing.T, args ...string) string {
	t.Helper()
	res := execute(context.Background(), args...)
	require.NoError(t, res.err, "commandbus %s\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), res.stdout, res.stderr)
	return res.stdout
}

// fail executes args; the command must fail.
func fail(t *testing.T, args ...string) result {
	t.Helper()
	res := execute(context.Background(), args...)
	require.Error(t, res.err, "commandbus %s should fail\nstdout:\n%s", strings.Join(args, " "), res.stdout)
	return res
}

func sqliteURL(t *testing.T, name string) string {
	return "sqlite://" + filepath.Join(t.TempDir(), name)
}

func TestDemoJSONSummary(t *testing.T) {
	t.Parallel()
	db := sqliteURL(t, "d.db")
	out := run(t, "demo", "--json", "--database", db, "--payments", "30", "--seed", "7", "--behavior", "happy", "--process", "PaymentManager")

	var summary demoSummary
	require.NoError(t, json.Unmarshal([]byte(out), &summary), "the output is one JSON object: %s", out)
	require.Equal(t, 30, summary.Payments)
	require.Equal(t, 30, summary.Completed, "with the happy behaviour every payment completes: %+v", summary)
	require.Zero(t, summary.DuplicateSubmissions)
	require.Zero(t, summary.InTSQ)
	require.Positive(t, summary.ElapsedS)
	require.Positive(t, summary.PaymentsPerS)
	require.GreaterOrEqual(t, summary.P99Ms, summary.P50Ms)
	require.Equal(t, map[tcc.Status]int{tcc.StatusConfirmed: 2, tcc.StatusCanceled: 1}, summary.Trips, "the demo's trip bookings: two confirmed, one cancelled")
	for _, field := range []string{"payments", "completed", "compensated", "failed", "cancelled", "in_tsq", "waiting",
		"duplicate_submissions", "leftover_effects", "elapsed_s", "payments_per_s", "p50_ms", "p99_ms"} {
		require.Contains(t, out, `"`+field+`"`)
	}
	require.NotContains(t, out, "[", "no progress bar in JSON mode")
}

func TestDemoHumanSummary(t *testing.T) {
	t.Parallel()
	db := sqliteURL(t, "d.db")
	res := execute(context.Background(), "demo", "--database", db, "--payments", "12", "--behavior", "chaos", "--seed", "3")
	require.NoError(t, res.err, res.stderr)
	require.Contains(t, res.stderr, "12 payments through the PaymentStep process")
	require.Contains(t, res.stderr, "/12", "a progress bar is shown")
	require.Contains(t, res.stdout, "OUTCOME")
	require.Contains(t, res.stdout, "total                                 12")
	require.Contains(t, res.stdout, "duplicate submissions: 0")
	require.Contains(t, res.stdout, "effects left under compensated payments: 0")
}

func TestDemoRejectsBadFlags(t *testing.T) {
	t.Parallel()
	res := fail(t, "demo", "--database", sqliteURL(t, "d.db"), "--payments", "0")
	require.ErrorContains(t, res.err, "--payments must be at least 1")
	res = fail(t, "demo", "--database", sqliteURL(t, "d.db"), "--process", "bogus")
	require.ErrorContains(t, res.err, "--process must be PaymentStep, PaymentManager or PaymentSaga")
	res = fail(t, "demo", "--database", sqliteURL(t, "d.db"), "--behavior", "no-such-preset-or-file")
	require.ErrorContains(t, res.err, "neither a preset")
}

// bookFx is a command the TSQ tests park on purpose.
type bookFx struct {
	PaymentID string `json:"paymentId"`
}

func (bookFx) Kind() string { return "BookFx" }

// parkCommands sends n commands whose handler fails permanently, and waits until all are parked.
func parkCommands(t *testing.T, path string, n int) {
	t.Helper()
	drv, err := sqlitedriver.Open(path, nil)
	require.NoError(t, err)
	defer drv.Close()
	_, err = migrate.New(drv, nil).Up(context.Background())
	require.NoError(t, err)
	handlers := commandbus.NewHandlers()
	commandbus.AddHandler(handlers, "fx", commandbus.HandlerFunc[bookFx](func(ctx context.Context, cmd *commandbus.Command[bookFx]) (any, error) {
		return nil, commandbus.Permanent("CURRENCY_PAIR_SUSPENDED", errors.New("EUR/USD is suspended by the provider"))
	}))
	client, err := commandbus.NewClient(drv, &commandbus.Config{Handlers: handlers, Logger: slog.New(slog.DiscardHandler),
		FetchPollInterval: commandbus.Duration(20 * time.Millisecond)})
	require.NoError(t, err)
	for i := range n {
		_, err := client.Send(context.Background(), "fx", bookFx{PaymentID: fmt.Sprint("PAY-", i)}, &commandbus.SendOpts{ReplyTo: "payments"})
		require.NoError(t, err)
	}
	require.NoError(t, client.Start(context.Background()))
	defer func() { require.NoError(t, client.Stop(context.Background())) }()
	require.Eventually(t, func() bool {
		rows, err := client.TSQ().List(context.Background(), commandbus.TSQFilter{})
		return err == nil && len(rows) == n
	}, 15*time.Second, 10*time.Millisecond)
}

// tsqRow is the part of a listed command the tests read.
type tsqRow struct {
	ID        uuid.UUID
	Status    string
	Domain    string
	Type      string
	ErrorCode string
}

func TestTSQFromTheCommandLine(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "d.db")
	db := "sqlite://" + path
	parkCommands(t, path, 4)

	var rows []tsqRow
	require.NoError(t, json.Unmarshal([]byte(run(t, "tsq", "list", "--json", "--database", db)), &rows))
	require.Len(t, rows, 4)
	for _, r := range rows {
		require.Equal(t, "IN_TSQ", r.Status)
		require.Equal(t, "fx", r.Domain)
		require.Equal(t, "BookFx", r.Type)
		require.Equal(t, "CURRENCY_PAIR_SUSPENDED", r.ErrorCode)
	}
	table := run(t, "tsq", "list", "--database", db)
	require.Contains(t, table, "CURRENCY_PAIR_SUSPENDED")
	require.Contains(t, table, rows[0].ID.String())

	retried, completed := rows[0].ID.String(), rows[1].ID.String()

	shown := run(t, "tsq", "show", retried, "--database", db)
	require.Contains(t, shown, "command     "+retried)
	require.Contains(t, shown, "status      IN_TSQ")
	require.Contains(t, shown, "CURRENCY_PAIR_SUSPENDED")
	require.Contains(t, shown, "reply to    payments")

	res := fail(t, "tsq", "retry", retried, "--database", db)
	require.ErrorContains(t, res.err, `"reason"`, "retry without --reason is refused")
	require.Contains(t, res.stderr, `"reason"`, "and the user is told why")
	require.Equal(t, commandbus.StatusInTSQ, showJSON(t, db, retried).Status, "a refused retry changes nothing")

	out := run(t, "tsq", "retry", retried, "--database", db, "--reason", "r", "--actor", "ops:alice")
	require.Contains(t, out, "is now PENDING")
	require.Equal(t, commandbus.StatusPending, showJSON(t, db, retried).Status)

	res = fail(t, "tsq", "complete", completed, "--database", db, "--reason", "r", "--result", "{not json")
	require.ErrorContains(t, res.err, "--result must be JSON")

	out = run(t, "tsq", "complete", completed, "--database", db, "--reason", "booked by phone", "--actor", "ops:bob", "--result", `{"x":1}`)
	require.Contains(t, out, "is now COMPLETED")
	shown = run(t, "tsq", "show", completed, "--database", db)
	require.Contains(t, shown, "status      COMPLETED")
	require.Regexp(t, regexp.MustCompile(`result\s+\{"x":\s?1\}`), shown)
	require.Regexp(t, regexp.MustCompile(`TSQ_COMPLETE\s+IN_TSQ→COMPLETED.*ops:bob\s+booked by phone`), shown)

	row := showJSON(t, db, completed)
	require.Equal(t, commandbus.StatusCompleted, row.Status)
	require.JSONEq(t, `{"x":1}`, string(row.Result))
	var audit *commandbus.AuditEntry
	for i := range row.Audit {
		if row.Audit[i].Event == "TSQ_COMPLETE" {
			audit = &row.Audit[i]
		}
	}
	require.NotNil(t, audit, "the completion is in the audit trail: %+v", row.Audit)
	require.Equal(t, "ops:bob", audit.Actor)
	require.Equal(t, "booked by phone", audit.Reason)
	require.Equal(t, commandbus.StatusInTSQ, audit.From)
	require.Equal(t, commandbus.StatusCompleted, audit.To)

	// Operator actions apply to parked commands only, and say why they do not.
	res = fail(t, "tsq", "cancel", retried, "--database", db, "--reason", "r")
	require.ErrorContains(t, res.err, "is PENDING, not in the troubleshooting queue")
	res = fail(t, "tsq", "cancel", completed, "--database", db, "--reason", "r")
	require.ErrorContains(t, res.err, "is COMPLETED, not in the troubleshooting queue")

	var left []tsqRow
	require.NoError(t, json.Unmarshal([]byte(run(t, "tsq", "list", "--json", "--database", db)), &left))
	require.Len(t, left, 2, "retry and complete took two commands out of the troubleshooting queue")

	out = run(t, "tsq", "cancel", left[0].ID.String(), "--database", db, "--reason", "customer withdrew")
	require.Contains(t, out, "is now CANCELLED")

	res = fail(t, "tsq", "show", uuid.NewString(), "--database", db)
	require.ErrorContains(t, res.err, "not found")
	res = fail(t, "tsq", "show", "not-a-uuid", "--database", db)
	require.ErrorContains(t, res.err, "command id")
}

// showJSON reads one command through `tsq show --json`.
func showJSON(t *testing.T, db, id string) *commandbus.CommandRow {
	t.Helper()
	var row commandbus.CommandRow
	require.NoError(t, json.Unmarshal([]byte(run(t, "tsq", "show", id, "--json", "--database", db)), &row))
	return &row
}

func TestMigrateStatusOnDemoDatabase(t *testing.T) {
	t.Parallel()
	db := sqliteURL(t, "d.db")
	run(t, "demo", "--json", "--database", db, "--payments", "1", "--behavior", "happy")
	out := run(t, "migrate", "status", "--database", db)
	require.Regexp(t, regexp.MustCompile(`(?m)^core\s+001\s+command_bus\s+\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}Z`), out, "001 is applied:\n%s", out)
	require.NotContains(t, out, "pending")
}

func TestMigrateUpDownStatus(t *testing.T) {
	t.Parallel()
	db := sqliteURL(t, "m.db")
	res, code := runExit(t, "migrate", "status", "--database", db)
	require.Equal(t, cli.ExitPending, code, "pending migrations: %v", res.err)
	require.Regexp(t, `(?m)^core\s+001\s+command_bus\s+pending`, res.stdout)
	require.Regexp(t, `applied 001_command_bus in `, run(t, "migrate", "up", "--database", db))
	require.Contains(t, run(t, "migrate", "up", "--database", db), "schema is up to date")
	require.NotContains(t, run(t, "migrate", "status", "--database", db), "pending")
	require.Regexp(t, `(?m)^payments\s+001\s+payments\s+\d{4}-`, run(t, "migrate", "status", "--database", db))
	require.Contains(t, run(t, "migrate", "down", "--line", "payments", "--database", db), "reverted payments/00")
	res, code = runExit(t, "migrate", "status", "--database", db)
	require.Equal(t, cli.ExitPending, code)
	require.Regexp(t, `(?m)^payments\s+00\d\s+\w+\s+pending`, res.stdout)
	require.Contains(t, run(t, "migrate", "up", "--database", db), "applied payments/00")
	res, code = runExit(t, "migrate", "down", "--steps", "0", "--database", db)
	require.Equal(t, cli.ExitUsage, code, "--steps 0 is not a way to revert everything: %v", res.err)
	require.ErrorContains(t, res.err, "--all")
	require.NotContains(t, run(t, "migrate", "status", "--line", "core", "--database", db), "pending", "nothing was reverted")
	require.Contains(t, run(t, "migrate", "down", "--all", "--dry-run", "--database", db), "would revert 001_command_bus")
	require.NotContains(t, run(t, "migrate", "status", "--line", "core", "--database", db), "pending", "a dry run changes nothing")
	require.Contains(t, run(t, "migrate", "down", "--all", "--database", db), "reverted 001_command_bus")
	require.Contains(t, run(t, "migrate", "down", "--database", db), "nothing to revert")
	require.Contains(t, run(t, "migrate", "up", "--dry-run", "--database", db), "would apply 001_command_bus")
	res, code = runExit(t, "migrate", "status", "--database", db)
	require.Equal(t, cli.ExitPending, code, "a dry run applies nothing")
	require.Regexp(t, `(?m)^core\s+001\s+command_bus\s+pending`, res.stdout)

	res = fail(t, "migrate", "sideways", "--database", db)
	require.ErrorContains(t, res.err, "unknown action")
	res = fail(t, "migrate", "status")
	require.ErrorContains(t, res.err, "no database")
}

func TestMigrateOnPostgres(t *testing.T) {
	t.Parallel()
	url := postgresURL(t)
	schema := freshPostgresSchema(t, url)
	out := run(t, "migrate", "up", "--database", url, "--schema", schema)
	require.Contains(t, out, "applied 001_command_bus")
	require.Regexp(t, `(?m)^core\s+001\s+command_bus\s+\d{4}-`, run(t, "migrate", "status", "--database", url, "--schema", schema))
}

func TestBenchBusJSON(t *testing.T) {
	t.Parallel()
	out := run(t, "bench", "bus", "--database", sqliteURL(t, "b.db"), "--commands", "300", "--json")
	var res map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &res), "the output is one JSON object: %s", out)
	for _, field := range []string{"commands", "elapsed_s", "commands_per_s", "p50_ms", "p99_ms", "driver", "config"} {
		require.Contains(t, res, field)
	}
	require.InDelta(t, 300, res["commands"], 0)
	require.Equal(t, "sqlite", res["driver"])
	require.Positive(t, res["elapsed_s"])
	require.Positive(t, res["commands_per_s"])
	require.GreaterOrEqual(t, res["p99_ms"], res["p50_ms"])
	config, ok := res["config"].(map[string]any)
	require.True(t, ok, "config is an object: %v", res["config"])
	require.InDelta(t, 300, config["commands"], 0)
	require.Equal(t, "written", config["replies"])
}

// writeConfig writes a worker configuration file.
func writeConfig(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "worker.yml")
	require.NoError(t, os.WriteFile(path, []byte(text), 0o600))
	return path
}

func TestWorkerRejectsInvalidConfigWithEveryProblem(t *testing.T) {
	t.Parallel()
	path := writeConfig(t, `
commandbus:
  domains:
    fx:
      concurrent-messages: -1
      max-attempts: many
    Bad__Name: {}
  colour: blue
`)
	res := execute(context.Background(), "worker", "--config", path, "--database", sqliteURL(t, "w.db"))
	require.ErrorIs(t, res.err, commandbus.ErrInvalidConfig)
	printed := res.stderr
	require.Contains(t, printed, path, "the message names the file")
	for _, problem := range []string{
		`unknown key "colour"`,
		`domains.fx.max-attempts: cannot read "many" as an integer`,
		"domains.fx.concurrent-messages: must be at least 1, got -1",
		"domains.Bad__Name: domain name must be lower-case",
	} {
		require.Contains(t, printed, problem, "every problem is printed")
	}
}

func TestWorkerNeedsItsConfigFile(t *testing.T) {
	t.Parallel()
	res := fail(t, "worker", "--database", sqliteURL(t, "w.db"))
	require.ErrorContains(t, res.err, "config")
	res = fail(t, "worker", "--config", filepath.Join(t.TempDir(), "missing.yml"), "--database", sqliteURL(t, "w.db"))
	require.ErrorIs(t, res.err, os.ErrNotExist)
}

const workerConfig = `
commandbus:
  domains:
    fx:
      concurrent-messages: 2
    payments:
      concurrent-messages: 1
  fetch-poll-interval: 20ms
  shutdown-timeout: 5s
`

func TestWorkerRefusesUnmigratedDatabase(t *testing.T) {
	t.Parallel()
	res := execute(context.Background(), "worker", "--config", writeConfig(t, workerConfig), "--database", sqliteURL(t, "w.db"), "--log-level", "error")
	require.Error(t, res.err)
	require.Contains(t, res.err.Error(), "migrate up", "the message says how to fix it")
}

// A worker on a database whose payments line is not migrated refuses to start, saying how to fix
// it, instead of creating the tables itself (DDL at start deadlocked live traffic).
func TestWorkerRefusesUnmigratedPaymentsLine(t *testing.T) {
	t.Parallel()
	db := sqliteURL(t, "w.db")
	run(t, "migrate", "up", "--line", "core", "--database", db)
	res := execute(context.Background(), "worker", "--config", writeConfig(t, workerConfig), "--database", db, "--log-level", "error")
	require.Error(t, res.err)
	require.Contains(t, res.err.Error(), "payments migration line has 0 of")
	require.Contains(t, res.err.Error(), "commandbus migrate up")
}

func TestWorkerRunsHandlersAndStopsOnCancel(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "w.db")
	db := "sqlite://" + path
	run(t, "migrate", "up", "--database", db)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var res result
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		res = execute(ctx, "worker", "--config", writeConfig(t, workerConfig), "--database", db, "--log-level", "warn")
	}()

	// A command sent by another client is handled by the running worker.
	drv, err := sqlitedriver.Open(path, nil)
	require.NoError(t, err)
	defer drv.Close()
	sender, err := commandbus.NewClient(drv, nil)
	require.NoError(t, err)
	// A balance check for an account that does not exist: the accounts domain's handler settles it.
	sent, err := sender.Send(context.Background(), "accounts", commandbus.RawArgs{Type: "CheckBalance",
		Data: json.RawMessage(`{"paymentId":"` + uuid.NewString() + `","account":"NO-SUCH-ACCOUNT","amount":"10.00","currency":"EUR"}`)}, nil)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		select {
		case <-exited:
			return true // reported below
		default:
		}
		row, err := sender.GetCommand(context.Background(), sent.ID)
		return err == nil && row.Status != commandbus.StatusPending && row.Status != commandbus.StatusRunning
	}, 20*time.Second, 10*time.Millisecond, "the worker handles a command")
	select {
	case <-exited:
		t.Fatalf("the worker exited before it was cancelled: %v\n%s", res.err, res.stderr)
	default:
	}

	cancel()
	select {
	case <-exited:
		require.NoError(t, res.err, "a cancelled worker shuts down cleanly\n%s", res.stderr)
	case <-time.After(20 * time.Second):
		t.Fatal("the worker did not stop after its context was cancelled")
	}
}

// postgresURL returns the test server's URL, or skips when it is unreachable (fails under
// COMMANDBUS_REQUIRE_POSTGRES=1).
func postgresURL(t *testing.T) string {
	t.Helper()
	dbtest.Pool(t)
	return dbtest.DatabaseURL()
}

// freshPostgresSchema returns an unused schema name, dropped when the test ends.
func freshPostgresSchema(t *testing.T, url string) string {
	t.Helper()
	schema := "cbcli_" + strings.ReplaceAll(uuid.NewString(), "-", "")[:12]
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := dbtest.Pool(t).Exec(ctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE"); err != nil {
			t.Logf("dropping schema %s: %v", schema, err)
		}
	})
	return schema
}

func TestOpenDatabaseNeedsURL(t *testing.T) {
	t.Parallel()
	_, err := openDatabase(context.Background(), "", "commandbus", 1)
	require.ErrorContains(t, err, "--database")
}

func TestRedactHidesPassword(t *testing.T) {
	t.Parallel()
	require.Equal(t, "postgres://user:xxxxx@db:5432/app", redact("postgres://user:secret@db:5432/app"))
	require.Equal(t, "postgres://user@db/app", redact("postgres://user@db/app"))
	require.Equal(t, "sqlite://x.db", redact("sqlite://x.db"))
}

func TestProcessTSQFromTheCommandLine(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	behavior := filepath.Join(dir, "stuck.yml")
	require.NoError(t, os.WriteFile(behavior, []byte("name: stuck\nsteps:\n  bookRisk:\n    failPermanentPct: 100\n"), 0o600))
	db := "sqlite://" + filepath.Join(dir, "p.db")
	var summary demoSummary
	require.NoError(t, json.Unmarshal([]byte(run(t, "demo", "--json", "--database", db, "--payments", "3", "--behavior", behavior)), &summary))
	require.Equal(t, 3, summary.InTSQ, "each payment parks with its risk command, parked in the command TSQ: %+v", summary)

	// The operator cancels the parked risk commands; the payments learn it from the CANCELLED
	// replies when the platform runs again, and stay in the process troubleshooting queue.
	var commands []tsqRow
	require.NoError(t, json.Unmarshal([]byte(run(t, "tsq", "list", "--json", "--database", db)), &commands))
	require.Len(t, commands, 3)
	for _, c := range commands {
		require.Equal(t, "risk", c.Domain)
		run(t, "tsq", "cancel", c.ID.String(), "--database", db, "--reason", "risk engine rejects the counterparty")
	}
	require.NoError(t, json.Unmarshal([]byte(run(t, "demo", "--json", "--database", db, "--resume")), &summary))
	require.Equal(t, 3, summary.InTSQ, "%+v", summary)

	var parked []struct {
		ID   uuid.UUID
		Type string
		Step string
	}
	require.NoError(t, json.Unmarshal([]byte(run(t, "tsq", "processes", "list", "--json", "--database", db)), &parked))
	require.Len(t, parked, 3)
	require.Equal(t, "PaymentStep", parked[0].Type)
	require.Contains(t, run(t, "tsq", "processes", "list", "--database", db), parked[0].ID.String())
	shown := run(t, "tsq", "processes", "show", parked[0].ID.String(), "--database", db)
	require.Contains(t, shown, "status      WAITING_FOR_TSQ")
	require.Contains(t, shown, "STEP bookRisk")
	require.Regexp(t, `STEP updateStatusProcessing\s+COMPLETED.*started \d\d:\d\d:\d\d\.\d{3} took `, shown, "a step's start and latency")

	res := fail(t, "tsq", "processes", "cancel", parked[0].ID.String(), "--database", db)
	require.ErrorContains(t, res.err, `"reason" not set`)
	out := run(t, "tsq", "processes", "cancel", parked[0].ID.String(), "--database", db, "--reason", "customer withdrew", "--compensate", "--actor", "ops:eve")
	require.Contains(t, out, "is now CANCELLED (by ops:eve: customer withdrew)")
	res = fail(t, "tsq", "processes", "complete", parked[1].ID.String(), "--database", db, "--reason", "settled by phone")
	require.ErrorContains(t, res.err, "stateOverrides.evidence", "a payment is not completed by hand without evidence")
	shown = run(t, "tsq", "processes", "show", parked[1].ID.String(), "--database", db)
	require.Contains(t, shown, "status      WAITING_FOR_TSQ", "the refused completion changed nothing")
	out = run(t, "tsq", "processes", "complete", parked[1].ID.String(), "--database", db, "--reason", "settled by phone",
		"--state", `{"evidence": "bank statement 2026-11-23 line 14"}`)
	require.Contains(t, out, "is now COMPLETED")
	res = fail(t, "tsq", "processes", "retry", parked[1].ID.String(), "--database", db, "--reason", "again")
	require.ErrorContains(t, res.err, "is COMPLETED")
}

// --version and the version command print the same build line.
func TestVersionFlagAndCommand(t *testing.T) {
	t.Parallel()
	want := "commandbus " + cli.ReadBuildInfo().String() + "\n"
	require.Equal(t, want, run(t, "--version"))
	require.Equal(t, want, run(t, "version"))
}

// A DBA's pipeline prints the SQL with the schema filled in, applies it without the binary,
// and the binary then sees the schema as migrated.
func TestMigrateSQLForADBAPipeline(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	schema := "cbtest_sql_" + strings.ReplaceAll(uuid.NewString()[:8], "-", "")
	t.Cleanup(func() { _, _ = pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+schema+" CASCADE") })

	script := run(t, "migrate", "sql", "--from", "0", "--schema", schema)
	require.Contains(t, script, "CREATE TABLE "+schema+".command")
	require.NotContains(t, script, "{schema}")
	require.Contains(t, script, "-- 001_command_bus up\nBEGIN;")
	_, err := pool.Exec(context.Background(), script)
	require.NoError(t, err, "the script applies as printed")
	url := dbtest.DatabaseURL()
	status := run(t, "migrate", "status", "--line", "core", "--database", url, "--schema", schema)
	require.NotContains(t, status, "pending", "the binary sees every core migration applied")
	require.Contains(t, run(t, "migrate", "up", "--line", "core", "--database", url, "--schema", schema), "schema is up to date")

	down := run(t, "migrate", "sql", "--from", "2", "--to", "1", "--schema", schema)
	require.Contains(t, down, "-- 002_executions down")
	require.NotContains(t, down, "001_command_bus")
	_, err = pool.Exec(context.Background(), down)
	require.NoError(t, err)
	res, code := runExit(t, "migrate", "status", "--line", "core", "--database", url, "--schema", schema)
	require.Equal(t, cli.ExitPending, code)
	require.Regexp(t, `(?m)^core\s+002\s+executions\s+pending`, res.stdout)

	res, code = runExit(t, "migrate", "sql", "--from", "0", "--to", "999", "--schema", schema)
	require.Equal(t, cli.ExitUsage, code, "%v", res.err)
	res, code = runExit(t, "migrate", "sql", "--database", "sqlite://x.db")
	require.Equal(t, cli.ExitUsage, code, "%v", res.err)
	res, code = runExit(t, "migrate", "up", "--from", "1", "--database", sqliteURL(t, "x.db"))
	require.Equal(t, cli.ExitUsage, code, "%v", res.err)
}
