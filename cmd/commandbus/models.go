package main

import (
	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/cli"
	"github.com/commandbus/commandbus/examples/fulfilment"
	"github.com/commandbus/commandbus/examples/onboarding"
	"github.com/commandbus/commandbus/examples/payments"
	"github.com/commandbus/commandbus/orchestration"
)

// cliConfig plugs this binary's models into the reusable operational commands: the payments
// platform's processes and the onboarding workflow, and the payments completion rule.
var cliConfig = cli.Config{
	Register: registerModels,
	// The same rule as the REST API and the console: a payment is completed by hand only on
	// evidence that it was made.
	CompletionRule: payments.CheckCompletion,
}

// registerModels creates the client's runtime with every model this binary runs: the payments
// platform's processes (its simulator off), the onboarding workflow and the fulfilment saga.
func registerModels(client *commandbus.Client) (*orchestration.Runtime, error) {
	rt, err := orchestration.New(client, orchestration.Config{})
	if err != nil {
		return nil, err
	}
	if _, err := payments.New(client, payments.Options{Runtime: rt, DisableSimulator: true}); err != nil {
		return nil, err
	}
	if _, err := onboarding.Register(rt); err != nil {
		return nil, err
	}
	if _, err := fulfilment.NewShop(fulfilment.DemoStock()).Register(rt); err != nil {
		return nil, err
	}
	return rt, nil
}

// The helpers of package cli that the commands kept here (demo, bench, serve, worker, simulate)
// share with the operational ones.
type (
	database      = cli.Database
	databaseFlags = cli.DatabaseFlags
)

var (
	openDatabase  = cli.OpenDatabase
	migrateUp     = cli.MigrateUp
	redact        = cli.Redact
	isPostgresURL = cli.IsPostgresURL
	envOr         = cli.EnvOr
	writeJSON     = cli.WriteJSON
)
