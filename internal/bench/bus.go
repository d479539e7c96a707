// Package bench measures commandbus end to end on a real database. The commandbus binary's
// `bench` commands and the Go benchmarks both run these functions, so the figures quoted in the
// README come from one implementation.
package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
)

// BusConfig configures the bus benchmark.
type BusConfig struct {
	// Commands is how many commands to send. Default: 20000.
	Commands int `json:"commands"`
	// SendBatch is how many commands one SendBatch call carries. Default: 1000.
	SendBatch int `json:"send_batch"`
	// Senders is how many goroutines send concurrently. Default: 2.
	Senders int `json:"senders"`
	// Concurrency is concurrent-messages of the command domain (and of the reply domain).
	// Default: 1000.
	Concurrency int `json:"concurrency"`
	// FetchBatch is the most commands claimed per query. Default: 1000.
	FetchBatch int `json:"fetch_batch"`
	// FetchCooldown is the least time between claims of one queue. Default: 2ms.
	FetchCooldown time.Duration `json:"fetch_cooldown_ns"`
	// Replies says how far the measured path goes after the handler: "written" (default) — each
	// completion also writes a reply to a reply queue that nobody consumes during the run;
	// "handled" — a no-op reply handler consumes every reply, which doubles the queue work;
	// "none" — commands have no replyTo.
	Replies string `json:"replies"`
	// Tracing records every span with the OpenTelemetry SDK (see benchTracing). Default: off.
	Tracing bool `json:"tracing"`
	// Logger receives progress; nil discards it.
	Logger *slog.Logger `json:"-"`
	// Progress, when set, receives a line per second while the benchmark runs.
	Progress io.Writer `json:"-"`
}

// BusResult is what the bus benchmark prints.
type BusResult struct {
	Driver       string    `json:"driver"`
	Commands     int       `json:"commands"`
	ElapsedS     float64   `json:"elapsed_s"`
	CommandsPerS float64   `json:"commands_per_s"`
	P50Ms        float64   `json:"p50_ms"`
	P99Ms        float64   `json:"p99_ms"`
	SendPerS     float64   `json:"send_per_s"`
	Config       BusConfig `json:"config"`
	GoMaxProcs   int       `json:"gomaxprocs"`
	// Spans is how many spans were recorded when tracing was on.
	Spans int64 `json:"spans,omitempty"`
}

// The reply modes of BusConfig.Replies.
const (
	RepliesWritten = "written"
	RepliesHandled = "handled"
	RepliesNone    = "none"
)

type noopArgs struct {
	N int `json:"n"`
}

func (noopArgs) Kind() string { return "BenchNoop" }

// WithDefaults fills unset fields.
func (c BusConfig) WithDefaults() BusConfig {
	if c.Commands == 0 {
		c.Commands = 20000
	}
	if c.SendBatch == 0 {
		c.SendBatch = 1000
	}
	if c.Senders == 0 {
		c.Senders = 2
	}
	if c.Concurrency == 0 {
		c.Concurrency = 1000
	}
	if c.FetchBatch == 0 {
		c.FetchBatch = 1000
	}
	if c.FetchCooldown == 0 {
		c.FetchCooldown = 2 * time.Millisecond
	}
	if c.Replies == "" {
		c.Replies = RepliesWritten
	}
	return c
}

// RunBus sends cfg.Commands no-op commands through a migrated, empty database and measures the
// whole path: batched send, claim, handle, batched completion with its reply (and, in "handled"
// mode, the reply's own claim, handling and completion). Elapsed time runs from the first send to
// the moment every outcome is committed. Latency runs from the commit of a command's send to its
// handler returning ("written", "none"; the outcome commits within about a millisecond after, in
// the next completion batch) or to its reply being handled ("handled"). A command delivered twice
// is counted once.
func RunBus(ctx context.Context, drv driver.Driver, cfg BusConfig) (*BusResult, error) {
	cfg = cfg.WithDefaults()
	switch cfg.Replies {
	case RepliesWritten, RepliesHandled, RepliesNone:
	default:
		return nil, fmt.Errorf("replies must be %q, %q or %q, got %q", RepliesWritten, RepliesHandled, RepliesNone, cfg.Replies)
	}
	handledReplies := cfg.Replies == RepliesHandled
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	// Per-command timestamps live in slices indexed by the command's sequence number (its args),
	// so measuring costs the measured path almost nothing; replies carry only the command id,
	// so the "handled" mode also keeps an id -> sequence map.
	var (
		sentAt   = make([]atomic.Int64, cfg.Commands) // unix nanos when the send committed
		doneAt   = make([]atomic.Int64, cfg.Commands)
		seqOf    sync.Map // command id -> sequence, "handled" mode only
		finished atomic.Int64
		allDone  = make(chan struct{})
		doneOnce sync.Once
	)
	record := func(seq int) {
		if seq < 0 || seq >= cfg.Commands || !doneAt[seq].CompareAndSwap(0, time.Now().UnixNano()) {
			return // redelivered: counted once
		}
		if finished.Add(1) == int64(cfg.Commands) {
			doneOnce.Do(func() { close(allDone) })
		}
	}
	handlers := commandbus.NewHandlers()
	commandbus.AddHandler(handlers, "bench", commandbus.HandlerFunc[noopArgs](func(ctx context.Context, cmd *commandbus.Command[noopArgs]) (any, error) {
		if !handledReplies {
			record(cmd.Args.N)
		}
		return nil, nil
	}))
	if handledReplies {
		commandbus.AddReplyHandler(handlers, "benchreply", "", func(ctx context.Context, msg *commandbus.ReplyMessage) error {
			if seq, ok := seqOf.Load(msg.Reply.CommandID); ok {
				record(seq.(int))
			}
			return nil
		})
	}
	domain := &commandbus.DomainConfig{ConcurrentMessages: cfg.Concurrency, FetchBatch: cfg.FetchBatch}
	tracing := newBenchTracing(cfg.Tracing)
	defer tracing.shutdown()
	client, err := commandbus.NewClient(drv, &commandbus.Config{
		TracerProvider: tracing.provider(),
		Handlers:       handlers,
		Logger:         logger,
		FetchCooldown:  commandbus.Duration(cfg.FetchCooldown),
		Domains:        map[string]*commandbus.DomainConfig{"bench": domain, "benchreply": domain},
	})
	if err != nil {
		return nil, err
	}
	if err := client.Start(ctx); err != nil {
		return nil, err
	}
	defer func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = client.Stop(stopCtx)
	}()

	opts := &commandbus.SendOpts{}
	if cfg.Replies != RepliesNone {
		opts.ReplyTo = "benchreply"
	}
	start := time.Now()
	var sendErr error
	var sendErrOnce sync.Once
	var sendDone sync.WaitGroup
	next := atomic.Int64{}
	var sendElapsed atomic.Int64
	for s := 0; s < cfg.Senders; s++ {
		sendDone.Add(1)
		go func() {
			defer sendDone.Done()
			for {
				from := int(next.Add(int64(cfg.SendBatch))) - cfg.SendBatch
				if from >= cfg.Commands || ctx.Err() != nil {
					return
				}
				to := min(from+cfg.SendBatch, cfg.Commands)
				params := make([]commandbus.SendParams, 0, to-from)
				for i := from; i < to; i++ {
					o := *opts
					o.ID = uuid.Must(uuid.NewV7())
					if handledReplies {
						seqOf.Store(o.ID, i)
					}
					params = append(params, commandbus.SendParams{Domain: "bench", Args: noopArgs{N: i}, Opts: &o})
				}
				// Stamp before sending: a fast handler may run before SendBatch returns. The
				// latency therefore includes the send's own commit.
				now := time.Now().UnixNano()
				for i := from; i < to; i++ {
					sentAt[i].Store(now)
				}
				if _, err := client.SendBatch(ctx, params); err != nil {
					sendErrOnce.Do(func() { sendErr = err })
					return
				}
				sendElapsed.Store(int64(time.Since(start)))
			}
		}()
	}

	ticker := time.NewTicker(time.Second)
	defer ticker.Stop()
	last := int64(0)
wait:
	for {
		select {
		case <-allDone:
			break wait
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-ticker.C:
			n := finished.Load()
			if cfg.Progress != nil {
				fmt.Fprintf(cfg.Progress, "  %6.1fs  %8d/%d done  %7d/s\n", time.Since(start).Seconds(), n, cfg.Commands, n-last)
			}
			last = n
			if sendErr != nil {
				return nil, fmt.Errorf("sending: %w", sendErr)
			}
		}
	}
	// Every handler has returned; wait for the last completion batch to commit.
	for {
		running, err := drv.Executor().CommandCountRunning(ctx, commandbus.CommandQueue("bench"))
		if err != nil {
			return nil, err
		}
		if running == 0 {
			break
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
	elapsed := time.Since(start)
	sendDone.Wait()
	if sendErr != nil {
		return nil, fmt.Errorf("sending: %w", sendErr)
	}
	latencies := make([]time.Duration, cfg.Commands)
	for i := range latencies {
		latencies[i] = time.Duration(doneAt[i].Load() - sentAt[i].Load())
	}
	sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
	return &BusResult{
		Driver:       drv.Name(),
		Commands:     cfg.Commands,
		ElapsedS:     round(elapsed.Seconds(), 3),
		CommandsPerS: round(float64(cfg.Commands)/elapsed.Seconds(), 0),
		P50Ms:        round(percentile(latencies, 0.50).Seconds()*1000, 2),
		P99Ms:        round(percentile(latencies, 0.99).Seconds()*1000, 2),
		SendPerS:     round(float64(cfg.Commands)/time.Duration(sendElapsed.Load()).Seconds(), 0),
		Config:       cfg,
		GoMaxProcs:   runtime.GOMAXPROCS(0),
		Spans:        tracing.spans(ctx),
	}, nil
}

// percentile returns the p-quantile of sorted durations (nearest rank).
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted))*p+0.5) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

func round(v float64, places int) float64 {
	scale := 1.0
	for range places {
		scale *= 10
	}
	return float64(int64(v*scale+0.5)) / scale
}
