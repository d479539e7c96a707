package payments_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/driver/pgdriver"
	"github.com/commandbus/commandbus/examples/payments"
	"github.com/commandbus/commandbus/internal/dbtest"
)

// TestInstanceKilledMidBatch runs two instances of the platform on one PostgreSQL schema, as a
// cluster's replicas. Early in a batch one of them loses its database for good, as if its
// process were killed: nothing it holds is released, its in-flight writes fail. When the leases
// it held run out, the survivor takes over its commands and executions, and every payment still
// completes, none is submitted twice, and money is conserved.
func TestInstanceKilledMidBatch(t *testing.T) {
	t.Parallel()
	for _, typ := range payments.ProcessTypes {
		t.Run(typ, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			drv := dbtest.Postgres(t)
			// The victim reaches the same schema through a pool of its own, which the test closes.
			victimPool, err := pgxpool.New(ctx, dbtest.DatabaseURL())
			require.NoError(t, err)
			victimDrv, err := pgdriver.New(victimPool, &pgdriver.Config{Schema: drv.Schema()})
			require.NoError(t, err)

			const lease = 2 * time.Second
			newInstance := func(d driver.Driver, name string, simulator bool) *payments.Platform {
				ms := func(n int) commandbus.Duration { return commandbus.Duration(time.Duration(n) * time.Millisecond) }
				domains := payments.DefaultDomainConfigs(8)
				for _, dc := range domains {
					dc.VisibilityTimeout = commandbus.Duration(lease)
				}
				client, err := commandbus.NewClient(d, &commandbus.Config{
					Logger:            slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelError})),
					WorkerID:          name,
					FetchPollInterval: ms(50),
					Domains:           domains,
					Process: commandbus.ProcessConfig{
						ExecutionLease: commandbus.Duration(lease), ConcurrentExecutions: 100,
						PendingPollInterval: ms(50), RetryPollInterval: ms(50), TimeoutCheckInterval: ms(200), DeadlineCheckInterval: ms(200),
					},
				})
				require.NoError(t, err)
				p, err := payments.New(client, payments.Options{Seed: 7, DisableSimulator: !simulator,
					SimulatorPollInterval: 20 * time.Millisecond, CustomersPerCurrency: 20, BeneficiariesPerCurrency: 20})
				require.NoError(t, err)
				require.NoError(t, client.Start(ctx))
				t.Cleanup(func() {
					stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					defer cancel()
					_ = client.Stop(stopCtx) // the victim's fails: its database is gone
				})
				return p
			}
			victim := newInstance(victimDrv, "victim", false)
			survivor := newInstance(drv, "survivor", true)

			happy, err := payments.Preset(payments.PresetHappy)
			require.NoError(t, err)
			const total = 400
			// The instances run on the wall clock, so the batch is for the wall clock's today (the
			// shared test day is in the past once the calendar passes it).
			day := time.Now().UTC().Format(time.DateOnly)
			batch, err := victim.CreateBatch(ctx, total, day, typ, happy)
			require.NoError(t, err)

			// Kill the victim as soon as payments complete: the batch is under way, and the victim
			// holds commands and executions (later, the step process's payments mostly wait for
			// the network, whose responses the survivor's simulator delivers to the survivor).
			eventually(t, 30*time.Second, "the first payments to complete", func() bool {
				sum, err := survivor.Summary(ctx, batch.ID)
				require.NoError(t, err)
				return sum.Completed > 0
			})
			victimPool.Close()
			atKill, err := survivor.Summary(ctx, batch.ID)
			require.NoError(t, err)
			require.Less(t, atKill.Completed, total, "the victim must die with work left")
			var heldCommands, heldExecutions int
			require.NoError(t, drv.Pool().QueryRow(ctx, fmt.Sprintf(
				`SELECT (SELECT count(*) FROM %[1]s.command WHERE status = 'RUNNING' AND worker_id = 'victim'),
				        (SELECT count(*) FROM %[1]s.execution WHERE worker_id = 'victim' AND lease_until > now())`, drv.Schema()),
			).Scan(&heldCommands, &heldExecutions))
			t.Logf("killed the victim with %d of %d payments completed, holding %d commands and %d executions",
				atKill.Completed, total, heldCommands, heldExecutions)
			require.Positive(t, heldCommands+heldExecutions, "the victim must die holding work, or nothing is recovered")

			var sum *payments.Summary
			eventually(t, 90*time.Second, "every payment to complete on the survivor", func() bool {
				sum, err = survivor.Summary(ctx, batch.ID)
				require.NoError(t, err)
				return sum.Completed == total
			})
			require.Zero(t, sum.DuplicateSubmissions)
			require.NoError(t, survivor.CheckInvariants(ctx))
		})
	}
}
