package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/cli"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/orchestration"
	"github.com/commandbus/commandbus/process"
)

// greeting is the state of the tiny process a team's binary registers in these tests.
type greeting struct {
	Name     string `json:"name"`
	Greeting string `json:"greeting,omitempty"`
}

type greetingProcess struct{}

func (greetingProcess) Type() string   { return "Greeting" }
func (greetingProcess) Domain() string { return "greetings" }

func (greetingProcess) Execute(x *process.Execution[greeting]) error {
	text, err := process.Step(x, "compose", func(ctx context.Context) (string, error) {
		return "Hello, " + x.State.Name, nil
	})
	x.State.Greeting = text
	return err
}

// registerGreeting is the Register hook of a binary that runs one process.
func registerGreeting(client *commandbus.Client) (*orchestration.Runtime, error) {
	rt, err := orchestration.New(client, orchestration.Config{})
	if err != nil {
		return nil, err
	}
	if _, err := process.NewManager(rt, process.Process[greeting](greetingProcess{})); err != nil {
		return nil, err
	}
	return rt, nil
}

// runCLI runs a root command made of cli.Commands(cfg) with args, as a team's main would.
func runCLI(cfg cli.Config, args ...string) (string, error) {
	return runCLIContext(context.Background(), cfg, args...)
}

// runCLIContext is runCLI under ctx.
func runCLIContext(ctx context.Context, cfg cli.Config, args ...string) (string, error) {
	root := &cobra.Command{Use: "teambin", SilenceUsage: true, SilenceErrors: true}
	root.AddCommand(cli.Commands(cfg)...)
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	return out.String(), err
}

// A team's binary registers its own process and operates its executions with the reused commands.
func TestCommandsWithATeamsModels(t *testing.T) {
	t.Parallel()
	db := "sqlite://" + filepath.Join(t.TempDir(), "team.db")
	refused := errors.New("a greeting is completed by hand only with --state greeting")
	cfg := cli.Config{
		Register: registerGreeting,
		CompletionRule: func(processType string, overrides map[string]any) error {
			if processType == "Greeting" && overrides["greeting"] == nil {
				return refused
			}
			return nil
		},
	}
	run := func(args ...string) string {
		t.Helper()
		out, err := runCLI(cfg, append(args, "--database", db)...)
		require.NoError(t, err, "teambin %s: %s", strings.Join(args, " "), out)
		return out
	}

	require.Contains(t, run("migrate", "up"), "applied 001_")
	require.Contains(t, run("executions", "list"), "no execution matches")

	out := run("executions", "start", "process", "Greeting", "--input", `{"name":"Ada"}`, "--business-key", "ada")
	id := regexp.MustCompile(`started process Greeting: (\S+)`).FindStringSubmatch(out)
	require.Len(t, id, 2, out)

	var rows []*driver.ExecutionRow
	require.NoError(t, json.Unmarshal([]byte(run("executions", "list", "--json")), &rows))
	require.Len(t, rows, 1)
	require.Equal(t, id[1], rows[0].ID.String())
	require.Equal(t, process.Model, rows[0].Model)
	require.Equal(t, "Greeting", rows[0].Type)
	require.Equal(t, "ada", rows[0].BusinessKey)
	require.Equal(t, driver.ExecutionPending, rows[0].Status)
	table := run("executions", "list", "--type", "Greeting")
	require.Contains(t, table, id[1])
	require.Contains(t, table, "PENDING")
	require.Contains(t, run("executions", "list", "--type", "Other"), "no execution matches")

	_, err := runCLI(cfg, "executions", "complete", id[1], "--reason", "by hand", "--database", db)
	require.ErrorIs(t, err, refused, "the application's completion rule is asked")
	require.Contains(t, run("executions", "complete", id[1], "--reason", "by hand", "--state", `{"greeting":"Hi"}`, "--actor", "ops:ann"),
		"is now COMPLETED (by ops:ann: by hand)")

	_, err = runCLI(cfg, "executions", "start", "process", "Nope", "--database", db)
	require.ErrorContains(t, err, `no process "Nope" in this binary; known: process Greeting`)
}

// Without a Register hook the commands still list executions, and refuse to act on a type the
// binary does not run.
func TestCommandsWithoutModels(t *testing.T) {
	t.Parallel()
	db := "sqlite://" + filepath.Join(t.TempDir(), "team.db")
	_, err := runCLI(cli.Config{Register: registerGreeting}, "migrate", "up", "--database", db)
	require.NoError(t, err)
	out, err := runCLI(cli.Config{Register: registerGreeting}, "executions", "start", "process", "Greeting", "--input", `{"name":"Bo"}`, "--database", db)
	require.NoError(t, err, out)
	id := regexp.MustCompile(`started process Greeting: (\S+)`).FindStringSubmatch(out)
	require.Len(t, id, 2, out)

	out, err = runCLI(cli.Config{}, "executions", "list", "--database", db)
	require.NoError(t, err)
	require.Contains(t, out, id[1])
	_, err = runCLI(cli.Config{}, "executions", "cancel", id[1], "--reason", "r", "--database", db)
	require.ErrorContains(t, err, `which this binary does not run`)
}

// The package is a library for any team's binary: it must not depend on the example platform.
func TestNoExampleDependency(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	require.NoError(t, err, "%s", out)
	deps := strings.Fields(string(out))
	require.Contains(t, deps, "github.com/commandbus/commandbus/cli")
	for _, dep := range deps {
		require.False(t, strings.HasPrefix(dep, "github.com/commandbus/commandbus/examples/"), "cli imports %s", dep)
	}
}

// Listings print a table, a JSON array ([] when empty, never null) or JSON lines; -o takes only
// those, and --json (the same as -o json) does not contradict -o.
func TestListingOutputFormats(t *testing.T) {
	t.Parallel()
	db := "sqlite://" + filepath.Join(t.TempDir(), "out.db")
	cfg := cli.Config{Register: registerGreeting}
	run := func(args ...string) string {
		t.Helper()
		out, err := runCLI(cfg, append(args, "--database", db)...)
		require.NoError(t, err, "teambin %s: %s", strings.Join(args, " "), out)
		return out
	}
	run("migrate", "up")
	for _, listing := range [][]string{{"tsq", "list"}, {"tsq", "processes", "list"}, {"dlq", "list"}, {"executions", "list"}} {
		name := strings.Join(listing, " ")
		require.Equal(t, "[]\n", run(append(listing, "-o", "json")...), "%s: an empty list is []", name)
		require.Equal(t, "[]\n", run(append(listing, "--json")...), name)
		require.Equal(t, "[]\n", run(append(listing, "--json", "-o", "json")...), name)
		require.Empty(t, run(append(listing, "-o", "jsonl")...), name)
		require.NotEmpty(t, run(listing...), "%s: the table says it is empty", name)
		_, err := runCLI(cfg, append(listing, "-o", "yaml", "--database", db)...)
		require.ErrorContains(t, err, `want table, json or jsonl, got "yaml"`, name)
		_, err = runCLI(cfg, append(listing, "--json", "-o", "table", "--database", db)...)
		require.ErrorContains(t, err, "--json and -o table contradict each other", name)
	}

	for _, name := range []string{"Ada", "Grace"} {
		run("executions", "start", "process", "Greeting", "--input", `{"name":"`+name+`"}`)
	}
	lines := strings.Split(strings.TrimSpace(run("executions", "list", "-o", "jsonl")), "\n")
	require.Len(t, lines, 2)
	for _, line := range lines {
		var row driver.ExecutionRow
		require.NoError(t, json.Unmarshal([]byte(line), &row), line)
		require.Equal(t, "Greeting", row.Type)
	}
	var rows []*driver.ExecutionRow
	require.NoError(t, json.Unmarshal([]byte(run("executions", "list", "-o", "json")), &rows))
	require.Len(t, rows, 2)
}

// version prints the build the toolchain recorded: a line for people, an object with -o json.
func TestVersionCommand(t *testing.T) {
	t.Parallel()
	out, err := runCLI(cli.Config{}, "version")
	require.NoError(t, err)
	info := cli.ReadBuildInfo()
	require.Equal(t, "teambin "+info.String()+"\n", out)
	require.Contains(t, out, info.GoVersion)
	require.Contains(t, out, info.Platform)

	out, err = runCLI(cli.Config{}, "version", "-o", "json")
	require.NoError(t, err)
	var got cli.BuildInfo
	require.NoError(t, json.Unmarshal([]byte(out), &got))
	require.Equal(t, info, got)
	require.NotEmpty(t, got.GoVersion)
	require.NotEmpty(t, got.Version)
}
