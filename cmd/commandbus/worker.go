package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/examples/busdemo"
)

func newWorkerCommand() *cobra.Command {
	var (
		configPath string
		url        string
		logLevel   string
	)
	cmd := &cobra.Command{
		Use:   "worker",
		Short: "Run the workers of the domains enabled in a configuration file",
		Long: "worker loads --config (YAML shaped as seed 001: features, domains, command-steps; every key\n" +
			"overridable as COMMANDBUS_<PATH>), connects to database.url (or --database), and runs the built-in\n" +
			"handlers of every enabled domain until interrupted; then it shuts down gracefully.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := commandbus.LoadConfig(configPath)
			if err != nil {
				return err
			}
			if url != "" {
				cfg.Database.URL = url
			}
			level := slog.LevelInfo
			if err := level.UnmarshalText([]byte(logLevel)); err != nil {
				return fmt.Errorf("--log-level: %w", err)
			}
			logger := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
			return runWorker(cmd.Context(), cfg, logger)
		},
	}
	cmd.Flags().StringVar(&configPath, "config", "", "configuration file (required)")
	cmd.Flags().StringVar(&url, "database", "", "database URL, overriding database.url")
	cmd.Flags().StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	_ = cmd.MarkFlagRequired("config")
	return cmd
}

func runWorker(ctx context.Context, cfg *commandbus.Config, logger *slog.Logger) error {
	db, err := openDatabase(ctx, cfg.Database.URL, cfg.WithDefaults().Database.Schema, 0)
	if err != nil {
		return err
	}
	defer db.close()
	handlers := commandbus.NewHandlers()
	busdemo.New(busdemo.Behavior{}, uint64(time.Now().UnixNano())).Register(handlers)
	cfg.Handlers = handlers
	cfg.Logger = logger
	client, err := commandbus.NewClient(db, cfg)
	if err != nil {
		return err
	}
	closeTransports, err := wireTransports(client, logger)
	if err != nil {
		return err
	}
	defer closeTransports()
	if err := client.Start(ctx); err != nil {
		return err
	}
	logger.Info("worker running; interrupt to stop", "driver", db.Name())
	<-ctx.Done()
	logger.Info("shutting down gracefully")
	stopCtx, cancel := context.WithTimeout(context.Background(), client.Config().ShutdownTimeout.Std())
	defer cancel()
	return client.Stop(stopCtx)
}
