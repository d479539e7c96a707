package cli_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

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
