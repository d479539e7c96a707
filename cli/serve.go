package cli

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"github.com/commandbus/commandbus/config"
)

// serviceFlags are the flags serve and worker share.
type serviceFlags struct {
	configPath string
	url        string
}

func (f *serviceFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.configPath, "config", "", "configuration file (required)")
	cmd.Flags().StringVar(&f.url, "database", "", "database URL, overriding database.url")
	_ = cmd.MarkFlagRequired("config")
}

// load reads the configuration file, applies --database and builds the logger on stderr (info as
// JSON unless --log-level or --log-format say otherwise).
func (f *serviceFlags) load(cmd *cobra.Command) (*config.File, *slog.Logger, error) {
	file, err := config.Load(f.configPath)
	if err != nil {
		return nil, nil, err
	}
	if f.url != "" {
		file.Database.URL = f.url
	}
	logger, err := Logger(cmd, os.Stderr, LogOptions{Level: slog.LevelInfo, Format: LogFormatJSON})
	if err != nil {
		return nil, nil, err
	}
	return file, logger, nil
}

func newServeCommand(cfg Config) *cobra.Command {
	var (
		flags       serviceFlags
		addr        string
		metricsAddr string
	)
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the workers with the REST API and operator console",
		Long: "serve loads --config, connects to database.url (or --database), runs the workers of the enabled\n" +
			"domains and the binary's models, and serves the REST API (/api, /api/openapi.json), the operator\n" +
			"console (/), /metrics, /healthz and /readyz on server.addr (or --addr). Bearer tokens and their roles\n" +
			"(viewer, operator) come from server.tokens (or COMMANDBUS_SERVER_TOKENS, COMMANDBUS_SERVER_TOKENS_FILE).\n" +
			"Inbound events start the definitions their types trigger, from POST /api/events and from\n" +
			"amqp.event-queues and kafka.event-topics. --metrics-addr also serves /metrics (unauthenticated),\n" +
			"/healthz and /readyz on an internal address. Shutdown as for worker. Run `migrate up` first.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			file, logger, err := flags.load(cmd)
			if err != nil {
				return err
			}
			if addr == "" {
				addr = file.WithDefaults().Server.Addr
			}
			if len(file.Server.Tokens) == 0 {
				return fmt.Errorf("server.tokens is empty: configure at least one operator token (see examples/profiles)")
			}
			return run(cmd.Context(), cfg, StackOptions{File: file, Logger: logger, ServeAddr: addr, MetricsAddr: metricsAddr})
		},
	}
	flags.register(cmd)
	cmd.Flags().StringVar(&addr, "addr", "", "listen address, overriding server.addr")
	cmd.Flags().StringVar(&metricsAddr, "metrics-addr", "", "internal address serving /metrics (unauthenticated), /healthz and /readyz, e.g. :9090")
	return cmd
}
