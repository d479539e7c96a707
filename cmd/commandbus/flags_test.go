package main

import (
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus/cli"
)

// walkCommands calls fn on root and every command under it.
func walkCommands(root *cobra.Command, fn func(c *cobra.Command)) {
	fn(root)
	for _, c := range root.Commands() {
		walkCommands(c, fn)
	}
}

// Every command takes --log-level and --log-format, and demo and the payments benchmarks take
// the process types the API takes.
func TestOneSetOfFlagNames(t *testing.T) {
	t.Parallel()
	root := newRootCommand()
	walkCommands(root, func(c *cobra.Command) {
		if !c.Runnable() {
			return
		}
		for _, name := range []string{"log-level", "log-format"} {
			f := c.Flags().Lookup(name)
			if f == nil {
				f = c.InheritedFlags().Lookup(name)
			}
			if f == nil {
				f = c.PersistentFlags().Lookup(name)
			}
			require.NotNil(t, f, "%s has no --%s", c.CommandPath(), name)
		}
		if v := c.Flags().Lookup("verbose"); v != nil {
			require.NotEmpty(t, v.Deprecated, "%s: --verbose is the older spelling of --log-level", c.CommandPath())
		}
	})
	for _, args := range [][]string{{"demo"}, {"bench", "payments"}, {"bench", "kill", "--database", "postgres://x@127.0.0.1:1/x"}} {
		res, code := runExit(t, append(args, "--process", "bogus")...)
		require.Equal(t, cli.ExitFailure, code)
		require.ErrorContains(t, res.err, "--process must be PaymentStep, PaymentManager or PaymentSaga (as processType in the API)", "%v", args)
	}
	res, code := runExit(t, "migrate", "status", "--log-format", "yaml", "--database", sqliteURL(t, "x.db"))
	require.Equal(t, cli.ExitUsage, code, "%v", res.err)
	require.ErrorContains(t, res.err, "--log-format must be text or json")
	res, code = runExit(t, "tsq", "list", "--log-level", "loud", "--database", sqliteURL(t, "x.db"))
	require.Equal(t, cli.ExitUsage, code, "%v", res.err)
}
