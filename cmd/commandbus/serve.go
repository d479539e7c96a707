package main

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"github.com/commandbus/commandbus/config"
)

func newServeCommand() *cobra.Command {
	var (
		configPath string
		url        string
		addr       string
		logLevel   string
	)
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the reference platform with its REST API and operator console",
		Long: "serve loads --config, connects to database.url (or --database), runs the workers of the enabled\n" +
			"domains and the payment processes, and serves the REST API (/api, /api/openapi.json), the operator\n" +
			"console (/), /metrics, /healthz and /readyz on server.addr (or --addr). Bearer tokens and their roles\n" +
			"(viewer, operator) come from server.tokens. Run `commandbus migrate up` first.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := config.Load(configPath)
			if err != nil {
				return err
			}
			if url != "" {
				cfg.Database.URL = url
			}
			if addr == "" {
				addr = cfg.WithDefaults().Server.Addr
			}
			if len(cfg.Server.Tokens) == 0 {
				return fmt.Errorf("server.tokens is empty: configure at least one operator token (see examples/profiles)")
			}
			level := slog.LevelInfo
			if err := level.UnmarshalText([]byte(logLevel)); err != nil {
				return fmt.Errorf("--log-level: %w", err)
			}
			logger := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
			return runStack(cmd.Context(), cfg, logger, addr)
		},
	}
	cmd.Flags().StringVar(&configPath, "config", "", "configuration file (required)")
	cmd.Flags().StringVar(&url, "database", "", "database URL, overriding database.url")
	cmd.Flags().StringVar(&addr, "addr", "", "listen address, overriding server.addr")
	cmd.Flags().StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	_ = cmd.MarkFlagRequired("config")
	return cmd
}
