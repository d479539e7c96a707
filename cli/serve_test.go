package cli_test

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/cli"
	"github.com/commandbus/commandbus/config"
	"github.com/commandbus/commandbus/driver"
)

// migratedSQLite returns a migrated SQLite database URL of the test and a configuration file.
func migratedSQLite(t *testing.T, configText string) (db, configFile string) {
	t.Helper()
	dir := t.TempDir()
	db = "sqlite://" + filepath.Join(dir, "team.db")
	_, err := runCLI(cli.Config{}, "migrate", "up", "--database", db)
	require.NoError(t, err)
	configFile = filepath.Join(dir, "team.yml")
	require.NoError(t, os.WriteFile(configFile, []byte(configText), 0o600))
	return db, configFile
}

// runService runs serve or worker with cfg until the test ends, and returns the running stack
// once Ready reports it.
func runService(t *testing.T, cfg cli.Config, args ...string) *cli.Stack {
	t.Helper()
	ready := make(chan *cli.Stack, 1)
	cfg.Ready = func(s *cli.Stack) { ready <- s }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := runCLIContext(ctx, cfg, args...)
		done <- err
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			require.NoError(t, err, "a cancelled %s shuts down cleanly", args[0])
		case <-time.After(20 * time.Second):
			t.Errorf("%s did not stop after its context was cancelled", args[0])
		}
	})
	select {
	case s := <-ready:
		return s
	case err := <-done:
		t.Fatalf("%s exited before it was ready: %v", args[0], err)
	case <-time.After(20 * time.Second):
		t.Fatalf("%s was not ready in time", args[0])
	}
	return nil
}

const teamConfig = `
domains:
  greetings:
    concurrent-messages: 3
fetch-poll-interval: 20ms
shutdown-timeout: 5s
process:
  pending-poll-interval: 20ms
server:
  tokens:
    - {subject: ops:ann, token: an-operator-token-of-the-team, role: operator}
`

// worker without a Setup hook runs the models of Register: a process started by another
// binary's command completes.
func TestWorkerRunsTheRegisteredModelsWithoutSetup(t *testing.T) {
	t.Parallel()
	db, configFile := migratedSQLite(t, teamConfig)
	s := runService(t, cli.Config{Register: registerGreeting}, "worker", "--config", configFile, "--database", db, "--log-level", "error")
	require.Nil(t, s.Server, "worker serves no HTTP")
	require.Empty(t, s.Addr)

	id := uuid.New()
	out, err := runCLI(cli.Config{Register: registerGreeting}, "executions", "start", "process", "Greeting", "--id", id.String(),
		"--input", `{"name":"Ada"}`, "--database", db)
	require.NoError(t, err, out)
	waitExecution(t, s, id, driver.ExecutionCompleted)
}

// A worker interrupted while it starts stops what it started and exits cleanly, as it does when
// interrupted later: an operator's SIGTERM during a slow start is no failure.
func TestWorkerInterruptedWhileStartingExitsCleanly(t *testing.T) {
	t.Parallel()
	db, configFile := migratedSQLite(t, teamConfig)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg := cli.Config{Register: registerGreeting, Configure: func(*config.File) error {
		cancel() // the interrupt arrives during the start
		return nil
	}}
	out, err := runCLIContext(ctx, cfg, "worker", "--config", configFile, "--database", db, "--log-level", "error")
	require.NoError(t, err, out)
}

// serve calls Configure before the client is created and Setup after, hands Setup the file,
// the runtime and whether it serves, runs the handler Setup registered, and mounts nothing the
// binary did not ask for.
func TestServeRunsWhatSetupRegisters(t *testing.T) {
	t.Parallel()
	db, configFile := migratedSQLite(t, teamConfig)
	var seen *cli.App
	cfg := cli.Config{
		Configure: func(file *config.File) error {
			file.Domains["greetings"].ConcurrentMessages = 7
			return nil
		},
		Setup: func(_ context.Context, app *cli.App) error {
			seen = app
			commandbus.AddHandler(app.Client.Config().Handlers, "greetings",
				commandbus.HandlerFunc[greet](func(_ context.Context, cmd *commandbus.Command[greet]) (any, error) {
					return map[string]string{"greeting": "hello, " + cmd.Args.Name}, nil
				}))
			return nil
		},
	}
	s := runService(t, cfg, "serve", "--config", configFile, "--database", db, "--addr", "127.0.0.1:0", "--log-level", "error")
	require.NotNil(t, seen)
	require.True(t, seen.Serving)
	require.Same(t, s.Runtime, seen.Runtime)
	require.Equal(t, 7, s.Client.Config().Domain("greetings").ConcurrentMessages, "Configure changed the client's configuration")

	sent, err := s.Client.Send(context.Background(), "greetings", greet{Name: "Bo"}, nil)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		row, err := s.Client.GetCommand(context.Background(), sent.ID)
		return err == nil && row.Status == commandbus.StatusCompleted
	}, 20*time.Second, 10*time.Millisecond, "the handler Setup registered runs")

	resp, err := http.Get("http://" + s.Addr + "/api/commands/" + sent.ID.String())
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "the API asks for the file's tokens")

	require.NotNil(t, s.Scheduler, "serve runs the scheduler")
	resp, err = http.Get("http://" + s.Addr + "/api/schedules")
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "the schedules routes are served (and ask for a token)")
}

// serve refuses a configuration without tokens, and a Setup error stops the start.
func TestServeRefusals(t *testing.T) {
	t.Parallel()
	db, noTokens := migratedSQLite(t, "fetch-poll-interval: 20ms\n")
	_, err := runCLI(cli.Config{}, "serve", "--config", noTokens, "--database", db, "--addr", "127.0.0.1:0")
	require.ErrorContains(t, err, "server.tokens is empty")

	_, configFile := migratedSQLite(t, teamConfig)
	broken := errors.New("the team's handlers need a key")
	_, err = runCLI(cli.Config{Setup: func(context.Context, *cli.App) error { return broken }},
		"worker", "--config", configFile, "--database", db, "--log-level", "error")
	require.ErrorIs(t, err, broken)
}

// waitExecution polls the execution until it has status want.
func waitExecution(t *testing.T, s *cli.Stack, id uuid.UUID, want driver.ExecutionStatus) {
	t.Helper()
	var last driver.ExecutionStatus
	require.Eventually(t, func() bool {
		row, err := s.Client.Driver().Executor().ExecutionGet(context.Background(), id)
		if err != nil {
			return false
		}
		last = row.Status
		return last == want
	}, 20*time.Second, 10*time.Millisecond, "execution %s: want %s, last seen %s", id, want, last)
}
