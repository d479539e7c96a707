package process_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/clock"
	"github.com/commandbus/commandbus/internal/dbtest"
	"github.com/commandbus/commandbus/process"
	"github.com/commandbus/commandbus/tracecontext"
	"github.com/commandbus/commandbus/tracing"
)

// syncBuffer is a log sink the handler goroutines write to while the test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) lines() []map[string]any {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	for _, line := range bytes.Split(b.buf.Bytes(), []byte("\n")) {
		var m map[string]any
		if json.Unmarshal(line, &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

// spansNamed returns the ended spans called name.
func spansNamed(spans tracetest.SpanStubs, name string) tracetest.SpanStubs {
	var out tracetest.SpanStubs
	for _, s := range spans {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

// TestTracingPaymentOverPostgresQueue: a payment (the FX process: a local step, a command step to
// the fx domain over the PostgreSQL queue, a last step) started under a request's span reads as
// one trace: the first run is the request's child, the fx handler's span the child of the
// checkpoint that issued its command, the reply handler's the child of the fx handler's, the
// second run (with its wait.resumed) the reply's child, and every step the child of its run. The
// claim that took the fx command links to the command's trace, and the handler's log line
// carries the handler span's ids. Both drivers.
func TestTracingPaymentOverPostgresQueue(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		exporter := tracetest.NewInMemoryExporter()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exporter))
		t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
		var logs syncBuffer
		logger := slog.New(tracing.LogHandler(slog.NewJSONHandler(&logs, nil)))

		fake := clock.NewFake(testStart)
		handlers := commandbus.NewHandlers()
		commandbus.AddHandler(handlers, "fx", commandbus.HandlerFunc[bookFxArgs](func(ctx context.Context, cmd *commandbus.Command[bookFxArgs]) (any, error) {
			logger.InfoContext(ctx, "booking fx", "payment_id", cmd.Args.PaymentID)
			return bookFxResult{Contract: "FX-" + cmd.Args.PaymentID}, nil
		}))
		cfg := testConfig(t, fake, handlers)
		cfg.Domains["fx"] = &commandbus.DomainConfig{ConcurrentMessages: 2, MaxAttempts: 1}
		cfg.TracerProvider = tp
		client := newClient(t, drv, cfg)
		m, err := process.NewManager(runtime(t, client), process.Process[fxState](fxProcess{calls: newCounter()}))
		require.NoError(t, err)
		start(t, client)

		ctx, request := tp.Tracer("test").Start(context.Background(), "POST /payments")
		id, err := m.Start(ctx, fxState{PaymentID: "P1", Amount: "100.00"})
		require.NoError(t, err)
		request.End()
		waitStatus(t, m, id, driver.ExecutionCompleted)

		// The second run ends after the checkpoint that completed the execution committed.
		var spans tracetest.SpanStubs
		eventually(t, 10*time.Second, "the second run's span", func() bool {
			spans = exporter.GetSpans()
			return len(spansNamed(spans, tracing.SpanExecutionRun)) >= 2 && len(spansNamed(spans, tracing.SpanReply)) == 1
		})
		dumpSpans(t, spans)
		traceID := request.SpanContext().TraceID()
		byID := map[trace.SpanID]tracetest.SpanStub{}
		for _, s := range spans {
			byID[s.SpanContext.SpanID()] = s
			if s.Name != tracing.SpanClaim {
				require.Equal(t, traceID, s.SpanContext.TraceID(), "span %s belongs to the payment's trace", s.Name)
			}
		}
		parentName := func(s tracetest.SpanStub) string {
			if s.Parent.SpanID() == request.SpanContext().SpanID() {
				return "POST /payments"
			}
			return byID[s.Parent.SpanID()].Name
		}

		runs := spansNamed(spans, tracing.SpanExecutionRun)
		first, second := runs[0], runs[len(runs)-1]
		require.Equal(t, request.SpanContext().SpanID(), first.Parent.SpanID(), "the first run is the request's child")

		steps := spansNamed(spans, tracing.SpanStep)
		require.Len(t, steps, 2, "reserve and submit ran once each")
		require.Equal(t, first.SpanContext.SpanID(), steps[0].Parent.SpanID(), "reserve runs in the first run")
		require.Equal(t, second.SpanContext.SpanID(), steps[1].Parent.SpanID(), "submit runs in the second run")

		handles := spansNamed(spans, tracing.SpanHandle)
		require.Len(t, handles, 1)
		handle := handles[0]
		require.Equal(t, tracing.SpanCheckpoint, parentName(handle), "the fx handler continues the checkpoint that issued its command")
		issuing := byID[handle.Parent.SpanID()]
		require.Equal(t, first.SpanContext.SpanID(), issuing.Parent.SpanID(), "that checkpoint is the first run's")

		reply := spansNamed(spans, tracing.SpanReply)[0]
		require.Equal(t, handle.SpanContext.SpanID(), reply.Parent.SpanID(), "the reply handler is the fx handler's child")
		require.Equal(t, reply.SpanContext.SpanID(), second.Parent.SpanID(), "the reply resumed the execution")
		resumed := spansNamed(spans, tracing.SpanWaitResumed)
		require.Len(t, resumed, 1)
		require.Equal(t, second.SpanContext.SpanID(), resumed[0].Parent.SpanID())

		// The claim of the fx command is a root linked to the command's trace.
		var linked bool
		for _, claim := range spansNamed(spans, tracing.SpanClaim) {
			require.False(t, claim.Parent.IsValid(), "a claim is a root span")
			for _, l := range claim.Links {
				if l.SpanContext.TraceID() == traceID && l.SpanContext.SpanID() == handle.Parent.SpanID() {
					linked = true
				}
			}
		}
		require.True(t, linked, "a claim links to the fx command's trace")

		// The handler's log line carries the handler span's trace and span ids.
		var found bool
		for _, line := range logs.lines() {
			if line["msg"] == "booking fx" {
				found = true
				require.Equal(t, traceID.String(), line[tracing.LogTraceID])
				require.Equal(t, handle.SpanContext.SpanID().String(), line[tracing.LogSpanID])
			}
		}
		require.True(t, found, "the handler logged")
	})
}

// TestTracingOffCreatesNoSpans: without a TracerProvider (the global no-op) a payment runs as
// before and its commands still carry the trace context of the request that started it.
func TestTracingOffCreatesNoSpans(t *testing.T) {
	t.Parallel()
	drv := dbtest.SQLite(t)
	fake := clock.NewFake(testStart)
	client, m, _ := fxFixture(t, drv, fake, func(ctx context.Context, cmd *commandbus.Command[bookFxArgs]) (any, error) {
		return bookFxResult{Contract: "FX-" + cmd.Args.PaymentID}, nil
	})
	start(t, client)
	const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	parsed, err := tracecontext.ParseTraceparent(traceparent)
	require.NoError(t, err)
	id, err := m.Start(tracecontext.ContextWith(context.Background(), parsed), fxState{PaymentID: "P1", Amount: "1.00"})
	require.NoError(t, err)
	waitStatus(t, m, id, driver.ExecutionCompleted)
	cmds, err := client.ListCommands(context.Background(), &commandbus.ListParams{Domain: "fx"})
	require.NoError(t, err)
	require.Len(t, cmds, 1)
	require.Equal(t, traceparent, cmds[0].Headers["traceparent"], "the command carries the starting request's traceparent")
}

func dumpSpans(t *testing.T, spans tracetest.SpanStubs) {
	for _, s := range spans {
		t.Logf("%s trace=%s span=%s parent=%s links=%d", s.Name, s.SpanContext.TraceID(), s.SpanContext.SpanID(), s.Parent.SpanID(), len(s.Links))
	}
}

// TestTracingOperatorAction: an operator's retry of a parked payment is a span of the payment's
// trace (a child of the request that started it), linked to the operator's own request span.
func TestTracingOperatorAction(t *testing.T) {
	t.Parallel()
	exporter := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exporter))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	var calls atomic.Int32
	handlers := commandbus.NewHandlers()
	commandbus.AddHandler(handlers, "fx", commandbus.HandlerFunc[bookFxArgs](func(ctx context.Context, cmd *commandbus.Command[bookFxArgs]) (any, error) {
		if calls.Add(1) == 1 {
			return nil, commandbus.Permanent("PROVIDER_REJECTED", errors.New("unknown account"))
		}
		return bookFxResult{Contract: "FX-RETRIED"}, nil
	}))
	cfg := testConfig(t, clock.NewFake(testStart), handlers)
	cfg.Domains["fx"] = &commandbus.DomainConfig{ConcurrentMessages: 2, MaxAttempts: 1}
	cfg.TracerProvider = tp
	client := newClient(t, dbtest.SQLite(t), cfg)
	m, err := process.NewManager(runtime(t, client), process.Process[fxState](fxProcess{calls: newCounter()}))
	require.NoError(t, err)
	start(t, client)

	ctx, request := tp.Tracer("test").Start(context.Background(), "POST /payments")
	id, err := m.Start(ctx, fxState{PaymentID: "P9", Amount: "5.00"})
	require.NoError(t, err)
	request.End()
	waitStatus(t, m, id, driver.ExecutionWaitingForTSQ)

	opCtx, opRequest := tp.Tracer("test").Start(context.Background(), "POST /executions/retry")
	require.NoError(t, m.Retry(opCtx, id, operator))
	opRequest.End()
	waitStatus(t, m, id, driver.ExecutionCompleted)

	var actions tracetest.SpanStubs
	for _, s := range exporter.GetSpans() {
		if s.Name == tracing.SpanOperatorAction {
			for _, a := range s.Attributes {
				if string(a.Key) == tracing.AttrExecutionID && a.Value.AsString() == id.String() {
					actions = append(actions, s)
				}
			}
		}
	}
	require.Len(t, actions, 1, "the retry of the execution")
	action := actions[0]
	require.Equal(t, request.SpanContext().TraceID(), action.SpanContext.TraceID(), "in the payment's trace")
	require.Equal(t, request.SpanContext().SpanID(), action.Parent.SpanID(), "a child of the request that started the payment")
	require.Len(t, action.Links, 1)
	require.Equal(t, opRequest.SpanContext().SpanID(), action.Links[0].SpanContext.SpanID(), "linked to the operator's request")
}
