package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/commandbus/commandbus/config"
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
		Long: "worker loads --config (YAML shaped as a Spring-style application.yml: features, domains,\n" +
			"command-steps; every key overridable as COMMANDBUS_<PATH>), connects to database.url (or\n" +
			"--database), and runs the built-in handlers of every enabled domain until interrupted; then it\n" +
			"shuts down gracefully.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := config.Load(configPath)
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

func runWorker(ctx context.Context, cfg *config.File, logger *slog.Logger) error {
	return runStack(ctx, cfg, logger, "")
}

// runStack runs the reference platform's workers (and, with addr, the REST API and console) until
// ctx ends, then shuts down gracefully.
func runStack(ctx context.Context, cfg *config.File, logger *slog.Logger, addr string) error {
	s, err := startStack(ctx, stackOptions{Config: cfg, Logger: logger, Seed: uint64(time.Now().UnixNano()), Simulator: cfg.Simulator.Enabled, ServeAddr: addr})
	if err != nil {
		return err
	}
	if s.addr != "" {
		logger.Info("serving the REST API and console", "url", "http://"+s.addr+"/")
	}
	logger.Info("running; interrupt to stop", "driver", s.db.Name(), "worker_id", s.client.Config().WorkerID)
	<-ctx.Done()
	logger.Info("shutting down gracefully")
	s.stop(context.Background())
	return nil
}
