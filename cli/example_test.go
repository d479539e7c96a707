package cli_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/cli"
)

// A team's binary adds the operational commands to its root, with its models registered, and
// operates its executions with them.
func ExampleCommands() {
	dir, _ := os.MkdirTemp("", "cli-example")
	defer os.RemoveAll(dir)
	db := "sqlite://" + filepath.Join(dir, "team.db")

	root := &cobra.Command{Use: "teambin", SilenceUsage: true}
	root.SetErr(io.Discard) // migrate logs what it applies there
	root.AddCommand(cli.Commands(cli.Config{Register: registerGreeting})...)
	run := func(out io.Writer, args ...string) {
		root.SetOut(out)
		root.SetArgs(append(args, "--database", db))
		if err := root.ExecuteContext(context.Background()); err != nil {
			fmt.Println(err)
		}
	}
	run(io.Discard, "migrate", "up")
	id := "6f1c2a9e-0b7d-4c3e-9a51-2d8e4f6b7c10"
	run(os.Stdout, "executions", "start", "process", "Greeting", "--id", id, "--input", `{"name":"Ada"}`)
	run(os.Stdout, "executions", "cancel", id, "--actor", "ops:ann", "--reason", "sent twice")
	// Output:
	// started process Greeting: 6f1c2a9e-0b7d-4c3e-9a51-2d8e4f6b7c10
	// execution 6f1c2a9e-0b7d-4c3e-9a51-2d8e4f6b7c10 is now CANCELLED (by ops:ann: sent twice)
}

// greet is the team's command.
type greet struct {
	Name string `json:"name"`
}

func (greet) Kind() string { return "Greet" }

// A team's binary registers its handler in Setup and reuses serve: the command it sends to its
// domain is handled by the running workers, and the REST API shows it completed.
func ExampleConfig_setup() {
	dir, _ := os.MkdirTemp("", "cli-serve-example")
	defer os.RemoveAll(dir)
	db := "sqlite://" + filepath.Join(dir, "team.db")
	configFile := filepath.Join(dir, "team.yml")
	_ = os.WriteFile(configFile, []byte(`
domains:
  greetings:
    concurrent-messages: 2
fetch-poll-interval: 20ms
shutdown-timeout: 5s
server:
  tokens:
    - {subject: ops:ann, token: an-operator-token-of-the-team, role: operator}
`), 0o600)

	ready := make(chan *cli.Stack, 1)
	root := &cobra.Command{Use: "teambin", SilenceUsage: true, SilenceErrors: true}
	root.SetOut(io.Discard) // migrate reports what it applied there
	root.SetErr(io.Discard)
	root.AddCommand(cli.Commands(cli.Config{
		Setup: func(_ context.Context, app *cli.App) error {
			commandbus.AddHandler(app.Client.Config().Handlers, "greetings",
				commandbus.HandlerFunc[greet](func(_ context.Context, cmd *commandbus.Command[greet]) (any, error) {
					return map[string]string{"greeting": "hello, " + cmd.Args.Name}, nil
				}))
			return nil
		},
		Ready: func(s *cli.Stack) { ready <- s },
	})...)
	root.SetArgs([]string{"migrate", "up", "--database", db})
	if err := root.Execute(); err != nil {
		fmt.Println(err)
		return
	}

	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() {
		root.SetArgs([]string{"serve", "--config", configFile, "--database", db, "--addr", "127.0.0.1:0", "--log-level", "error"})
		served <- root.ExecuteContext(ctx)
	}()
	var s *cli.Stack
	select {
	case s = <-ready:
	case err := <-served:
		fmt.Println("serve:", err)
		stop()
		return
	}

	sent, _ := s.Client.Send(ctx, "greetings", greet{Name: "Ada"}, nil)
	var row struct {
		Status string `json:"status"`
		Result struct {
			Greeting string `json:"greeting"`
		} `json:"result"`
	}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		req, _ := http.NewRequest(http.MethodGet, "http://"+s.Addr+"/api/commands/"+sent.ID.String(), nil)
		req.Header.Set("Authorization", "Bearer an-operator-token-of-the-team")
		if resp, err := http.DefaultClient.Do(req); err == nil {
			_ = json.NewDecoder(resp.Body).Decode(&row)
			_ = resp.Body.Close()
		}
		if row.Status == string(commandbus.StatusCompleted) {
			break
		}
	}
	fmt.Println(row.Status, row.Result.Greeting)

	stop()
	fmt.Println("serve stopped:", <-served)
	// Output:
	// COMPLETED hello, Ada
	// serve stopped: <nil>
}
