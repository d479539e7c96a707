package tracing_test

import (
	"context"
	"log/slog"
	"os"

	"github.com/commandbus/commandbus/tracecontext"
	"github.com/commandbus/commandbus/tracing"
)

// A handler's log line carries the trace and span ids of the command it runs.
func ExampleLogHandler() {
	noTime := func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}
	logger := slog.New(tracing.LogHandler(slog.NewJSONHandler(os.Stdout, &slog.HandlerOptions{ReplaceAttr: noTime})))
	sc, _ := tracecontext.ParseTraceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	ctx := tracecontext.ContextWith(context.Background(), sc)
	logger.InfoContext(ctx, "payment submitted", "payment_id", "P-1")
	// Output:
	// {"level":"INFO","msg":"payment submitted","payment_id":"P-1","trace_id":"4bf92f3577b34da6a3ce929d0e0e4736","span_id":"00f067aa0ba902b7"}
}
