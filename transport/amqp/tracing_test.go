package amqp_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/dbtest"
	"github.com/commandbus/commandbus/outbox"
	"github.com/commandbus/commandbus/tracing"
	"github.com/commandbus/commandbus/transport/internal/brokertest"
)

// TestTracingPaymentOverBroker: a payment whose FX command goes through the outbox and RabbitMQ
// reads as one trace. The relay's publication of the command and the consumer's inbox check are
// children of the checkpoint that issued it, as is the fx handler's span; the publication of the
// reply (and of the outcome event to Kafka), the reply's inbox check and the reply handler are
// children of the fx handler's span; the run the reply resumed is the reply handler's child.
func TestTracingPaymentOverBroker(t *testing.T) {
	exporter := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exporter))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	p, manager := processPlatformOpts(t, platformOpts{replies: true, drv: dbtest.Postgres(t), tracerProvider: tp})

	ctx, request := tp.Tracer("test").Start(context.Background(), "POST /payments")
	id, err := manager.Start(ctx, fxPaymentState{PaymentID: "P-1"})
	require.NoError(t, err)
	request.End()
	brokertest.WaitFor(t, "the process to complete", func() bool {
		inst, err := manager.Get(ctx, id)
		require.NoError(t, err)
		return inst.Status == driver.ExecutionCompleted
	})

	named := func(spans tracetest.SpanStubs, name string) tracetest.SpanStubs {
		var out tracetest.SpanStubs
		for _, s := range spans {
			if s.Name == name {
				out = append(out, s)
			}
		}
		return out
	}
	var spans tracetest.SpanStubs
	brokertest.WaitFor(t, "the spans of both runs and of three publications", func() bool {
		spans = exporter.GetSpans()
		return len(named(spans, tracing.SpanExecutionRun)) == 2 && len(named(spans, tracing.SpanOutboxPublish)) >= 3
	})
	traceID := request.SpanContext().TraceID()
	byID := map[trace.SpanID]tracetest.SpanStub{}
	for _, s := range spans {
		byID[s.SpanContext.SpanID()] = s
		if s.Name != tracing.SpanClaim {
			require.Equal(t, traceID, s.SpanContext.TraceID(), "span %s belongs to the payment's trace", s.Name)
		}
	}
	parent := func(s tracetest.SpanStub) tracetest.SpanStub { return byID[s.Parent.SpanID()] }

	runs := named(spans, tracing.SpanExecutionRun)
	require.Equal(t, request.SpanContext().SpanID(), runs[0].Parent.SpanID(), "the first run is the request's child")
	handles := named(spans, tracing.SpanHandle)
	require.Len(t, handles, 1, "the fx handler ran once")
	handle := handles[0]
	issuing := parent(handle)
	require.Equal(t, tracing.SpanCheckpoint, issuing.Name, "the fx handler continues the checkpoint that issued its command")
	require.Equal(t, runs[0].SpanContext.SpanID(), issuing.Parent.SpanID())

	var commandPublished, replyPublished, eventPublished bool
	for _, pub := range named(spans, tracing.SpanOutboxPublish) {
		require.Equal(t, trace.SpanKindProducer, pub.SpanKind)
		var topic string
		for _, a := range pub.Attributes {
			if string(a.Key) == tracing.AttrTopic {
				topic = a.Value.AsString()
			}
		}
		switch {
		case topic == outbox.ReplyQueueName(p.prefix):
			replyPublished = true
			require.Equal(t, handle.SpanContext.SpanID(), pub.Parent.SpanID(), "the reply's publication is the handler's child")
		case topic == "events.Fx":
			eventPublished = true
			require.Equal(t, handle.SpanContext.SpanID(), pub.Parent.SpanID(), "the event's publication is the handler's child")
		default:
			commandPublished = true
			require.Equal(t, issuing.SpanContext.SpanID(), pub.Parent.SpanID(), "the command's publication (%s) is the checkpoint's child", topic)
		}
	}
	require.True(t, commandPublished && replyPublished && eventPublished, "command, reply and event were published")

	dedupes := named(spans, tracing.SpanInboxDedupe)
	require.Len(t, dedupes, 2, "the command's and the reply's inbox checks")
	require.Equal(t, issuing.SpanContext.SpanID(), dedupes[0].Parent.SpanID(), "the command's inbox check continues the checkpoint")
	require.Equal(t, handle.SpanContext.SpanID(), dedupes[1].Parent.SpanID(), "the reply's inbox check continues the handler")

	reply := named(spans, tracing.SpanReply)
	require.Len(t, reply, 1)
	require.Equal(t, handle.SpanContext.SpanID(), reply[0].Parent.SpanID(), "the reply handler is the fx handler's child")
	require.Equal(t, reply[0].SpanContext.SpanID(), runs[1].Parent.SpanID(), "the reply resumed the execution")
}
