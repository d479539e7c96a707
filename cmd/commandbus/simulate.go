package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/commandbus/commandbus/cli"
	"github.com/commandbus/commandbus/examples/payments"
	"github.com/commandbus/commandbus/examples/payments/fxapi"
)

func newSimulateCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "simulate",
		Short: "Run a simulated external party of the reference payments platform",
	}
	cmd.AddCommand(newSimulateFXCommand())
	return cmd
}

func newSimulateFXCommand() *cobra.Command {
	var db databaseFlags
	var addr string
	var seed uint64
	cmd := &cobra.Command{
		Use:   "fx",
		Short: "Serve the simulated FX provider's HTTP API",
		Long: "fx serves the simulated FX provider (POST /v1/contracts, POST /v1/contracts/{id}/cancel,\n" +
			"POST /v1/contracts/void, GET /v1/contracts/{id}) on --addr until interrupted: one provider for\n" +
			"every replica, as a real\n" +
			"one is. Point the instances at it with fx.url (or COMMANDBUS_FX_URL). With --database its\n" +
			"contracts are kept in that database (the payments migration line must be applied), so they\n" +
			"survive a restart and any number of these processes are one provider; without, in memory.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runSimulateFX(cmd.Context(), cmd, db, addr, seed)
		},
	}
	cmd.Flags().StringVar(&addr, "addr", "127.0.0.1:8090", "listen address")
	cmd.Flags().Uint64Var(&seed, "seed", 1, "seed of the simulated misbehaviour")
	db.Register(cmd, "")
	return cmd
}

func runSimulateFX(ctx context.Context, cmd *cobra.Command, db databaseFlags, addr string, seed uint64) error {
	logger, err := cli.Logger(cmd, cmd.ErrOrStderr(), cli.LogOptions{Level: slog.LevelInfo})
	if err != nil {
		return err
	}
	var store fxapi.Store = fxapi.NewMemoryStore()
	if db.URL != "" {
		database, err := openDatabase(ctx, db.URL, db.Schema, 4)
		if err != nil {
			return err
		}
		defer database.Close()
		if store, err = payments.NewFXStore(ctx, database.Driver); err != nil {
			return err
		}
	}
	api, err := fxapi.ListenStore(addr, seed, store)
	if err != nil {
		return err
	}
	api.Serve()
	fmt.Fprintf(cmd.OutOrStdout(), "simulated FX provider on %s\n", api.URL())
	logger.Info("serving the simulated FX provider; interrupt to stop", "url", api.URL(), "database", db.URL != "")
	<-ctx.Done()
	stopCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := api.Close(stopCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
