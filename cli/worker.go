package cli

import (
	"github.com/spf13/cobra"
)

func newWorkerCommand(cfg Config) *cobra.Command {
	var (
		flags       serviceFlags
		metricsAddr string
	)
	cmd := &cobra.Command{
		Use:   "worker",
		Short: "Run the workers of the domains enabled in a configuration file",
		Long: "worker loads --config (YAML shaped as a Spring-style application.yml: features, domains,\n" +
			"command-steps; every key overridable as COMMANDBUS_<PATH>), connects to database.url (or\n" +
			"--database), and runs the handlers of every enabled domain and the binary's models until\n" +
			"interrupted, consuming the inbound events of amqp.event-queues and kafka.event-topics. With\n" +
			"--metrics-addr it serves /metrics (no authentication: keep the address internal), /healthz and\n" +
			"/readyz there. On SIGTERM or an interrupt /readyz fails at once and the worker shuts down within\n" +
			"server.shutdown-budget (default 25s, below Kubernetes' 30s grace); a second interrupt stops at once.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			file, logger, err := flags.load(cmd)
			if err != nil {
				return err
			}
			return run(cmd.Context(), cfg, StackOptions{File: file, Logger: logger, MetricsAddr: metricsAddr})
		},
	}
	flags.register(cmd)
	cmd.Flags().StringVar(&metricsAddr, "metrics-addr", "", "internal address serving /metrics (unauthenticated), /healthz and /readyz, e.g. :9090")
	return cmd
}
