package maintenance_test

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/commandbus/commandbus/internal/maintenance"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/jackc/pgx/v5/pgxpool.(*Pool).backgroundHealthCheck"),
		goleak.IgnoreTopFunction("database/sql.(*DB).connectionOpener"))
}

func TestRunnerRunsTasksUntilStopped(t *testing.T) {
	t.Parallel()
	var fast, failing atomic.Int64
	ran := make(chan struct{}, 100)
	r := maintenance.New(slog.New(slog.DiscardHandler),
		maintenance.Task{Name: "fast", Interval: time.Millisecond, Run: func(ctx context.Context) error {
			fast.Add(1)
			ran <- struct{}{}
			return nil
		}},
		maintenance.Task{Name: "failing", Interval: time.Millisecond, Run: func(ctx context.Context) error {
			failing.Add(1)
			return errors.New("database down")
		}},
	)
	r.Start(context.Background())
	for range 3 {
		select {
		case <-ran:
		case <-time.After(10 * time.Second):
			t.Fatal("the task did not run")
		}
	}
	r.Stop()
	require.GreaterOrEqual(t, fast.Load(), int64(3))
	require.Positive(t, failing.Load(), "a failing task keeps running")
	after := fast.Load()
	require.Equal(t, after, fast.Load(), "nothing runs after Stop")
}
