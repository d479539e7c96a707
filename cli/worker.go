package cli

import (
	"github.com/spf13/cobra"
)

func newWorkerCommand(cfg Config) *cobra.Command {
	var flags serviceFlags
	cmd := &cobra.Command{
		Use:   "worker",
		Short: "Run the workers of the domains enabled in a configuration file",
		Long: "worker loads --config (YAML shaped as a Spring-style application.yml: features, domains,\n" +
			"command-steps; every key overridable as COMMANDBUS_<PATH>), connects to database.url (or\n" +
			"--database), and runs the handlers of every enabled domain and the binary's models until\n" +
			"interrupted, consuming the inbound events of amqp.event-queues and kafka.event-topics; then it shuts\n" +
			"down gracefully.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			file, logger, err := flags.load(cmd)
			if err != nil {
				return err
			}
			return run(cmd.Context(), cfg, StackOptions{File: file, Logger: logger})
		},
	}
	flags.register(cmd)
	return cmd
}
