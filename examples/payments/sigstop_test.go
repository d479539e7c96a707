//go:build unix

package payments_test

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver/pgdriver"
	"github.com/commandbus/commandbus/examples/payments"
	"github.com/commandbus/commandbus/internal/dbtest"
)

// frozenWorkerSchemaEnv names the schema the helper process works on; it is set only for the
// helper process that TestFrozenWorkerDoesNotStallOtherPayments starts.
const (
	frozenWorkerSchemaEnv = "PAYMENTS_TEST_FROZEN_WORKER_SCHEMA"
	frozenWorkerMarker    = "FROZEN-INSIDE-SUBMIT-TRANSACTION"
	frozenWorkerLease     = 3 * time.Second
)

// A worker process stopped (SIGSTOP) inside SubmitPayment's transaction, after it locked the
// debit account's row, must not stall the other payments on that account. Nothing in the frozen
// process runs, so only the server can free the row: it ends the session after a third of the
// lease (idle_in_transaction_session_timeout set by the handler's transaction guard). The other
// worker's SubmitPayment handlers wait at most half of their lease for the lock per attempt
// (lock_timeout), so every other payment is submitted while the first worker is still
// frozen, none is parked, and the frozen worker's payment is submitted once by the other worker
// after its lease ran out.
func TestFrozenWorkerDoesNotStallOtherPayments(t *testing.T) {
	t.Parallel()
	drv := dbtest.Postgres(t)
	f := newLeaseFixture(t, drv, false)

	helper := exec.Command(os.Args[0], "-test.run=^TestFrozenWorkerHelperProcess$", "-test.count=1", "-test.v")
	helper.Env = append(os.Environ(), frozenWorkerSchemaEnv+"="+drv.Schema())
	out, err := helper.StdoutPipe()
	require.NoError(t, err)
	helper.Stderr = testWriter{t}
	require.NoError(t, helper.Start())
	t.Cleanup(func() {
		_ = helper.Process.Signal(syscall.SIGKILL)
		_ = helper.Wait()
	})
	frozen := make(chan struct{})
	helperOutput := make(chan string, 1000)
	go func() {
		scanner := bufio.NewScanner(out)
		for scanner.Scan() {
			if strings.Contains(scanner.Text(), frozenWorkerMarker) {
				close(frozen)
				break
			}
			helperOutput <- scanner.Text()
		}
		for scanner.Scan() { // drain, so that the helper never blocks on a full pipe
		}
	}()

	first := f.submit(domestic(payments.TypePaymentStep)) // run by the helper, which has started
	select {
	case <-frozen:
	case <-time.After(60 * time.Second):
		for len(helperOutput) > 0 {
			t.Log("helper: " + <-helperOutput)
		}
		t.Fatal("the helper process never reached SubmitPayment's transaction")
	}
	require.NoError(t, helper.Process.Signal(syscall.SIGSTOP))

	require.NoError(t, f.client.Start(context.Background()))
	var others []uuid.UUID
	for range 4 {
		others = append(others, f.submit(domestic(payments.TypePaymentStep)).PaymentID)
	}
	for _, id := range others {
		f.waitWaiting(id, "awaitL1") // submitted while the helper is still stopped
	}
	f.waitWaiting(first.PaymentID, "awaitL1") // taken over after the frozen worker's lease
	list, err := f.client.ListCommands(context.Background(), &commandbus.ListParams{Statuses: []commandbus.Status{commandbus.StatusInTSQ}})
	require.NoError(t, err)
	require.Empty(t, list, "no command may be parked because of the frozen worker")
	f.checkInvariants()
}

// TestFrozenWorkerHelperProcess is the worker that TestFrozenWorkerDoesNotStallOtherPayments
// starts and freezes; run alone it skips.
func TestFrozenWorkerHelperProcess(t *testing.T) {
	schema := os.Getenv(frozenWorkerSchemaEnv)
	if schema == "" {
		t.Skip("the helper process of TestFrozenWorkerDoesNotStallOtherPayments")
	}
	pool, err := pgxpool.New(context.Background(), dbtest.DatabaseURL())
	require.NoError(t, err)
	drv, err := pgdriver.New(pool, &pgdriver.Config{Schema: schema})
	require.NoError(t, err)
	f := newLeaseFixture(t, drv, true)
	require.NoError(t, f.client.Start(context.Background()))
	select {} // until the test kills this process
}

// newLeaseFixture builds a platform on the real clock whose domains lease commands for
// frozenWorkerLease; with freeze, its SubmitPayment handler announces frozenWorkerMarker on
// stdout inside its transaction and blocks there. The client is not started.
func newLeaseFixture(t *testing.T, drv *pgdriver.Driver, freeze bool) *fixture {
	noJitter := 0.0
	ms := func(n int) commandbus.Duration { return commandbus.Duration(time.Duration(n) * time.Millisecond) }
	domains := payments.DefaultDomainConfigs(4)
	for _, d := range domains {
		d.MaxAttempts = 3
		d.VisibilityTimeout = commandbus.Duration(frozenWorkerLease)
		d.Retry = commandbus.RetryPolicy{InitialDelay: ms(100), MaxDelay: ms(500), Jitter: &noJitter}
	}
	client, err := commandbus.NewClient(drv, &commandbus.Config{
		Logger:            slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})),
		FetchPollInterval: ms(20),
		Domains:           domains,
		Process: commandbus.ProcessConfig{
			PendingPollInterval: ms(20), RetryPollInterval: ms(20), TimeoutCheckInterval: ms(20),
			DeadlineCheckInterval: ms(20),
		},
	})
	require.NoError(t, err)
	p, err := payments.New(client, payments.Options{DisableSimulator: true, CustomersPerCurrency: 3, BeneficiariesPerCurrency: 3})
	require.NoError(t, err)
	if freeze {
		payments.SetAfterAccountsLocked(p, func(context.Context) {
			fmt.Println(frozenWorkerMarker)
			select {} // the test stops this process here
		})
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, client.Stop(ctx))
	})
	return &fixture{t: t, client: client, p: p}
}
