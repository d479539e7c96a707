package payments_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/driver/pgdriver"
	"github.com/commandbus/commandbus/examples/payments"
	"github.com/commandbus/commandbus/examples/payments/fxapi"
	"github.com/commandbus/commandbus/internal/dbtest"
)

// replica starts one instance of the platform on drv, as one of a cluster's replicas.
func replica(t *testing.T, drv driver.Driver, name string, opts payments.Options) (*payments.Platform, *commandbus.Client) {
	t.Helper()
	ms := func(n int) commandbus.Duration { return commandbus.Duration(time.Duration(n) * time.Millisecond) }
	client, err := commandbus.NewClient(drv, &commandbus.Config{
		Logger:            slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelError})),
		WorkerID:          name,
		FetchPollInterval: ms(50),
		Domains:           payments.DefaultDomainConfigs(8),
		Process: commandbus.ProcessConfig{
			ExecutionLease:      commandbus.Duration(5 * time.Second),
			PendingPollInterval: ms(50), RetryPollInterval: ms(50), TimeoutCheckInterval: ms(200), DeadlineCheckInterval: ms(200),
		},
	})
	require.NoError(t, err)
	if opts.SimulatorPollInterval == 0 {
		opts.SimulatorPollInterval = 20 * time.Millisecond
	}
	opts.CustomersPerCurrency, opts.BeneficiariesPerCurrency = 5, 5
	p, err := payments.New(client, opts)
	require.NoError(t, err)
	require.NoError(t, client.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = client.Stop(ctx) // a killed replica's fails
	})
	return p, client
}

// fxCall calls the simulated FX provider's HTTP API.
func fxCall(t *testing.T, url, key string, body any) (int, *fxapi.Contract) {
	t.Helper()
	encoded, err := json.Marshal(body)
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(encoded))
	require.NoError(t, err)
	req.Header.Set(fxapi.HeaderIdempotencyKey, key)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var c fxapi.Contract
	_ = json.NewDecoder(resp.Body).Decode(&c)
	return resp.StatusCode, &c
}

// The simulated FX provider is one service for every replica: a contract booked through one
// replica's endpoint is cancelled through another's, also after the first replica stopped.
// Before, each replica had its own in-memory provider and CancelFx failed with
// FX_CONTRACT_NOT_FOUND, leaving compensated payments with a booked contract.
func TestFXProviderSharedByReplicas(t *testing.T) {
	t.Parallel()
	eachDriver(t, func(t *testing.T, drv driver.Driver) {
		a, clientA := replica(t, drv, "a", payments.Options{DisableSimulator: true})
		b, _ := replica(t, drv, "b", payments.Options{DisableSimulator: true})
		require.NotEqual(t, a.FXAPIURL(), b.FXAPIURL())

		req := fxapi.ContractRequest{SellCurrency: "EUR", BuyCurrency: "USD", SellAmount: decimal.RequireFromString("100.00"), ValueDate: today, Reference: uuid.NewString()}
		status, booked := fxCall(t, a.FXAPIURL()+"/v1/contracts", "book-1", req)
		require.Equal(t, http.StatusCreated, status)
		status, again := fxCall(t, b.FXAPIURL()+"/v1/contracts", "book-1", req)
		require.Equal(t, http.StatusOK, status, "the key's contract is known to the other replica")
		require.Equal(t, booked.ID, again.ID)

		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, clientA.Stop(ctx))
		status, cancelled := fxCall(t, b.FXAPIURL()+"/v1/contracts/"+booked.ID+"/cancel", "cancel-1", struct{}{})
		require.Equal(t, http.StatusOK, status)
		require.Equal(t, "CANCELLED", cancelled.Status)
	})
}

// With two simulating replicas on one database, one of them simulates the network at a time:
// every payment gets each answer once (before, both answered and answers were recorded twice).
// When the simulating replica dies without giving the role up, the other takes it over once the
// lease expires, and the payments still complete.
func TestNetworkSimulatedByOneReplica(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	drv := dbtest.Postgres(t)
	// The first replica reaches the schema through a pool of its own, which the test closes to
	// kill it.
	victimPool, err := pgxpool.New(ctx, dbtest.DatabaseURL())
	require.NoError(t, err)
	victimDrv, err := pgdriver.New(victimPool, &pgdriver.Config{Schema: drv.Schema()})
	require.NoError(t, err)
	opts := payments.Options{SimulatorLease: time.Second}
	first, _ := replica(t, victimDrv, "first", opts)
	second, _ := replica(t, drv, "second", opts)
	require.True(t, first.SimulatesNetwork(), "the first replica to start takes the role")
	require.False(t, second.SimulatesNetwork())

	happy, err := payments.Preset(payments.PresetHappy)
	require.NoError(t, err)
	const total = 30
	day := time.Now().Format(time.DateOnly)
	batch, err := second.CreateBatch(ctx, total, day, payments.TypePaymentStep, happy)
	require.NoError(t, err)
	eventually(t, 60*time.Second, "the batch to complete", func() bool {
		sum, err := second.Summary(ctx, batch.ID)
		require.NoError(t, err)
		return sum.Completed == total
	})
	// Under load the short lease may change hands during the batch; what must hold is that
	// every answer is given once, by whichever replica held the role at the time.
	firstAnswers, secondAnswers := first.SimulatorAnswers(), second.SimulatorAnswers()
	decided := func() int64 {
		approved, err := second.ListApprovals(ctx, payments.ApprovalFilter{Status: "APPROVED", Limit: 1000})
		require.NoError(t, err)
		rejected, err := second.ListApprovals(ctx, payments.ApprovalFilter{Status: "REJECTED", Limit: 1000})
		require.NoError(t, err)
		return int64(len(approved) + len(rejected))
	}
	approvals := decided()
	require.Equal(t, 4*total+approvals, firstAnswers+secondAnswers, "each of the four levels (and each approval) answered once per payment")
	require.NoError(t, second.CheckInvariants(ctx))

	victimPool.Close() // killed: the lease is not released
	eventually(t, 10*time.Second, "the survivor to take the role over", second.SimulatesNetwork)
	batch, err = second.CreateBatch(ctx, total, day, payments.TypePaymentStep, happy)
	require.NoError(t, err)
	eventually(t, 60*time.Second, "the second batch to complete", func() bool {
		sum, err := second.Summary(ctx, batch.ID)
		require.NoError(t, err)
		return sum.Completed == total
	})
	require.Equal(t, 4*total+decided()-approvals, second.SimulatorAnswers()-secondAnswers)
	require.NoError(t, second.CheckInvariants(ctx))
}
