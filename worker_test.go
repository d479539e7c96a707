package commandbus

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/clock"
	"github.com/commandbus/commandbus/internal/dbtest"
)

// A handler that stalls past its lease loses the command to another worker, which completes it
// once; the stale handler's late success is rejected by the fence.
func TestStalledHandlerLosesLeaseAndIsFenced(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		fake := clock.NewFake(time.Now())
		stalled := make(chan struct{})
		release := make(chan struct{})
		var calls atomic.Int32

		newClient := func(workerID string) *Client {
			handlers := NewHandlers()
			AddHandler(handlers, "risk", HandlerFunc[testArgs](func(ctx context.Context, cmd *Command[testArgs]) (any, error) {
				if calls.Add(1) == 1 {
					close(stalled)
					<-release // ignores ctx: a handler stuck in a call without a deadline
					return map[string]string{"by": "stale"}, nil
				}
				return map[string]string{"by": "fresh"}, nil
			}))
			dc := fastDomain(1, 3)
			dc.VisibilityTimeout = Duration(time.Second)
			return newTestClient(t, drv, &Config{Handlers: handlers, WorkerID: workerID, Clock: fake,
				Domains: map[string]*DomainConfig{"risk": dc}})
		}
		replies := NewHandlers()
		collector := collectReplies(replies, "payments")
		replyClient := newTestClient(t, drv, &Config{Handlers: replies, WorkerID: "replies", Clock: fake})
		startClient(t, replyClient)

		a := newClient("worker-a")
		startClient(t, a)
		res, err := a.Send(ctx, "risk", testArgs{}, &SendOpts{ReplyTo: "payments"})
		require.NoError(t, err)
		<-stalled

		fake.Advance(2 * time.Second) // worker-a's lease has expired
		b := newClient("worker-b")
		startClient(t, b)
		row := waitStatus(t, b, res.ID, StatusCompleted)
		require.JSONEq(t, `{"by":"fresh"}`, string(row.Result))
		require.Equal(t, 2, row.Attempt)
		require.Equal(t, []string{"SENT", "CLAIMED", "LEASE_EXPIRED", "CLAIMED", "COMPLETED"}, auditEvents(row))
		require.Equal(t, "worker-a", row.Audit[1].Actor)
		require.Equal(t, "worker-b", row.Audit[3].Actor)
		require.Equal(t, 2, row.Audit[3].Attempt)

		close(release) // the stale handler now reports success with the old fence
		eventually(t, 10*time.Second, "the stale outcome to be fenced", func() bool {
			return testutilCounter(a.metrics.fenceRejections) == 1
		})
		row, err = b.GetCommand(ctx, res.ID)
		require.NoError(t, err)
		require.JSONEq(t, `{"by":"fresh"}`, string(row.Result), "the stale completion must not overwrite")
		completions := 0
		for _, e := range row.Audit {
			if e.Event == "COMPLETED" {
				completions++
			}
		}
		require.Equal(t, 1, completions)
		require.Equal(t, OutcomeSuccess, collector.next(t).Outcome)
		require.Equal(t, 1, collector.count(), "exactly one reply")
	})
}

// Issue 15, defect 9: a command whose lease expired on its last attempt is timed out by the
// watchdog without a further claim: it never shows "attempt 4 of 3", and its handler is not
// called again.
func TestLeaseExpiredOnLastAttemptTimesOutWithoutAnotherClaim(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		fake := clock.NewFake(time.Now())
		release := make(chan struct{})
		var calls atomic.Int32
		handlers := NewHandlers()
		AddHandler(handlers, "risk", HandlerFunc[testArgs](func(ctx context.Context, cmd *Command[testArgs]) (any, error) {
			calls.Add(1)
			<-release // ignores ctx: stuck past its lease
			return nil, nil
		}))
		collector := collectReplies(handlers, "payments")
		dc := fastDomain(2, 2)
		dc.VisibilityTimeout = Duration(time.Second)
		// The test runs the watchdog itself; its own pass runs only at the start.
		c := newTestClient(t, drv, &Config{Handlers: handlers, Clock: fake, WatchdogInterval: Duration(time.Hour),
			Domains: map[string]*DomainConfig{"risk": dc}})
		startClient(t, c)
		defer close(release)
		res, err := c.Send(ctx, "risk", testArgs{}, &SendOpts{ReplyTo: "payments"})
		require.NoError(t, err)
		eventually(t, 10*time.Second, "the first attempt to run", func() bool { return calls.Load() == 1 })
		fake.Advance(2 * time.Second) // the first lease expires: the worker claims attempt 2
		eventually(t, 10*time.Second, "the second attempt to run", func() bool { return calls.Load() == 2 })
		fake.Advance(2 * time.Second) // the last lease expires
		queues, err := c.exec.MetricsQueues(ctx, c.now())
		require.NoError(t, err)
		require.Len(t, queues, 1)
		require.Equal(t, int64(1), queues[0].ExpiredLeases, "the metrics see the expired lease before the watchdog")

		moved, err := c.RunWatchdog(ctx)
		require.NoError(t, err)
		require.Equal(t, 1, moved)
		require.Equal(t, 1.0, testutil.ToFloat64(c.metrics.leaseExpiries.WithLabelValues("risk")), "the watchdog counts the expiry")
		require.Equal(t, 2.0, testutil.ToFloat64(c.metrics.claimedTotal.WithLabelValues("risk", CommandQueue("risk"))), "two claims")
		row := waitStatus(t, c, res.ID, StatusTimedOut)
		require.Equal(t, 2, row.Attempt, "attempt 2 of 2, never 3")
		require.Equal(t, CodeLeaseExpired, row.ErrorCode)
		require.Equal(t, "lease expired on attempt 2 of 2", row.ErrorMessage)
		require.Equal(t, []string{"SENT", "CLAIMED", "LEASE_EXPIRED", "CLAIMED", "TIMED_OUT"}, auditEvents(row))
		require.Equal(t, OutcomeTimedOut, collector.next(t).Outcome)
		require.Equal(t, int32(2), calls.Load(), "the handler ran its two attempts, no third")
	})
}

// Two instances with concurrent-messages 2 never run more than 4 handlers of the domain at once.
func TestConcurrencyAcrossReplicas(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		var inFlight, maxInFlight, done atomic.Int32
		newClient := func() *Client {
			handlers := NewHandlers()
			AddHandler(handlers, "fx", HandlerFunc[testArgs](func(ctx context.Context, cmd *Command[testArgs]) (any, error) {
				n := inFlight.Add(1)
				for {
					m := maxInFlight.Load()
					if n <= m || maxInFlight.CompareAndSwap(m, n) {
						break
					}
				}
				time.Sleep(15 * time.Millisecond) // simulated downstream latency
				inFlight.Add(-1)
				done.Add(1)
				return nil, nil
			}))
			return newTestClient(t, drv, &Config{Handlers: handlers, Domains: map[string]*DomainConfig{"fx": {ConcurrentMessages: 2}}})
		}
		first, second := newClient(), newClient()
		var commands []SendParams
		for i := 0; i < 60; i++ {
			commands = append(commands, SendParams{Domain: "fx", Args: testArgs{N: i}})
		}
		_, err := first.SendBatch(ctx, commands)
		require.NoError(t, err)
		startClient(t, first)
		startClient(t, second)
		eventually(t, 30*time.Second, "all commands handled", func() bool { return done.Load() == 60 })
		t.Logf("max in flight across 2 replicas × 2 concurrent-messages: %d", maxInFlight.Load())
		require.LessOrEqual(t, maxInFlight.Load(), int32(4))
		require.GreaterOrEqual(t, maxInFlight.Load(), int32(3), "both replicas should have worked in parallel")
	})
}

// Stop lets running handlers finish within its deadline, and releases the commands of handlers
// that do not, so another worker takes them at once.
func TestGracefulShutdown(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		started := make(chan int, 10)
		finish := make(chan struct{})
		handlers := NewHandlers()
		AddHandler(handlers, "fx", HandlerFunc[testArgs](func(ctx context.Context, cmd *Command[testArgs]) (any, error) {
			started <- cmd.Args.N
			if cmd.Args.N == 1 {
				<-finish // finishes during shutdown
				return nil, nil
			}
			<-ctx.Done() // honours cancellation, so it is interrupted by the shutdown deadline
			return nil, ctx.Err()
		}))
		client := newTestClient(t, drv, &Config{Handlers: handlers})
		res1, err := client.Send(ctx, "fx", testArgs{N: 1}, nil)
		require.NoError(t, err)
		res2, err := client.Send(ctx, "fx", testArgs{N: 2}, nil)
		require.NoError(t, err)
		require.NoError(t, client.Start(ctx))
		<-started
		<-started

		stopCtx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		go func() { close(finish) }()
		require.NoError(t, client.Stop(stopCtx))

		row1, err := client.GetCommand(ctx, res1.ID)
		require.NoError(t, err)
		require.Equal(t, StatusCompleted, row1.Status, "in-flight work finishes within the deadline")
		row2, err := client.GetCommand(ctx, res2.ID)
		require.NoError(t, err)
		require.Equal(t, StatusPending, row2.Status, "interrupted work is released")
		require.Equal(t, 0, row2.Attempt, "a released command gets its attempt back")
		require.Equal(t, "RELEASED_ON_SHUTDOWN", row2.Audit[len(row2.Audit)-1].Event)

		// Another instance picks the released command up at once.
		next := NewHandlers()
		AddHandler(next, "fx", HandlerFunc[testArgs](func(ctx context.Context, cmd *Command[testArgs]) (any, error) { return nil, nil }))
		successor := newTestClient(t, drv, &Config{Handlers: next})
		startClient(t, successor)
		waitStatus(t, successor, res2.ID, StatusCompleted)
	})
}

func testutilCounter(c prometheus.Counter) float64 { return testutil.ToFloat64(c) }
