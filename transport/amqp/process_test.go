package amqp_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/dbtest"
	"github.com/commandbus/commandbus/orchestration"
	"github.com/commandbus/commandbus/outbox"
	"github.com/commandbus/commandbus/process"
	"github.com/commandbus/commandbus/transport/internal/brokertest"
	"github.com/commandbus/commandbus/workflow"
)

// fxPaymentState is the state of the process that books FX over the broker.
type fxPaymentState struct {
	PaymentID string `json:"paymentId"`
	Contract  string `json:"contract,omitempty"`
}

type fxContract struct {
	Contract string `json:"contract"`
}

// fxPayment books FX with a command step to the fx domain, whose transport is amqp.
type fxPayment struct{}

func (fxPayment) Type() string   { return "FxPayment" }
func (fxPayment) Domain() string { return "treasury" }

func (fxPayment) Execute(x *process.Execution[fxPaymentState]) error {
	fx, err := process.CommandStep[fxPaymentState, BookFx, fxContract](x, "BOOK_FX", "fx", "BookFx",
		BookFx{PaymentID: x.State.PaymentID}, process.MaxAttempts(1), process.Timeout(time.Minute))
	if err != nil {
		return err
	}
	x.State.Contract = fx.Contract
	return nil
}

// processPlatform is the broker platform with the FxPayment process registered on its client.
func processPlatform(t *testing.T, drv driver.Driver) (*platform, *process.Manager[fxPaymentState]) {
	t.Helper()
	return processPlatformOpts(t, platformOpts{replies: true, drv: drv})
}

// processPlatformOpts is processPlatform with opts (their setup is replaced).
func processPlatformOpts(t *testing.T, opts platformOpts) (*platform, *process.Manager[fxPaymentState]) {
	t.Helper()
	var manager *process.Manager[fxPaymentState]
	opts.setup = func(client *commandbus.Client) {
		rt, err := orchestration.New(client, orchestration.Config{})
		require.NoError(t, err)
		manager, err = process.NewManager[fxPaymentState](rt, fxPayment{})
		require.NoError(t, err)
	}
	p := newPlatform(t, opts)
	return p, manager
}

// TestProcessCommandStepOverBroker: a process's command step to an amqp domain goes through the
// outbox like Send (command row and CommandRequested message in the checkpoint's transaction),
// RabbitMQ delivers it to the handler, and the reply coming back over the reply queue resumes the
// process. The envelope carries the stable step key as idempotencyKey, the execution as
// correlation and causation, the tenant and a traceparent. Both drivers.
func TestProcessCommandStepOverBroker(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		p, manager := processPlatform(t, drv)
		ctx := context.Background()
		id, err := manager.Start(ctx, fxPaymentState{PaymentID: "P-1"}, process.WithTenant("acme"))
		require.NoError(t, err)

		var inst *process.Instance[fxPaymentState]
		brokertest.WaitFor(t, "the process to complete", func() bool {
			inst, err = manager.Get(ctx, id)
			require.NoError(t, err)
			return inst.Status == driver.ExecutionCompleted
		})
		require.Equal(t, "FX-1", inst.State.Contract)
		require.EqualValues(t, 1, p.Calls.Load(), "the handler ran once")

		// The command row: correlated with and caused by the execution, the tenant's, completed.
		cmds, err := p.Client.ListCommands(ctx, &commandbus.ListParams{Domain: "fx", Kind: driver.CommandKindCommand})
		require.NoError(t, err)
		require.Len(t, cmds, 1)
		cmd := cmds[0]
		require.Equal(t, commandbus.StatusCompleted, cmd.Status)
		require.Equal(t, id, cmd.CorrelationID)
		require.Equal(t, id, cmd.CausationID)
		require.Equal(t, "acme", cmd.TenantID)

		// Its CommandRequested outbox message, published to the command queue with the envelope.
		// The relay marks it published with its next claim, a few milliseconds after the broker
		// took it.
		var rows []*driver.OutboxRow
		brokertest.WaitFor(t, "the CommandRequested marked published", func() bool {
			var err error
			rows, err = drv.Executor().OutboxList(ctx, &driver.OutboxListParams{Topic: outbox.CommandQueueName(p.prefix, "fx", "BookFx"), Limit: 10})
			require.NoError(t, err)
			require.Len(t, rows, 1, "one CommandRequested message for the process's command")
			return rows[0].Status == driver.OutboxStatusPublished
		})
		env, err := outbox.Decode(rows[0].Payload)
		require.NoError(t, err)
		require.Equal(t, outbox.TypeCommandRequested, env.Type)
		require.Equal(t, cmd.ID, env.CommandID)
		require.Equal(t, id.String()+":BOOK_FX", env.Headers.IdempotencyKey, "the stable step key")
		require.Equal(t, id, env.CorrelationID)
		require.Equal(t, id, env.CausationID)
		require.Equal(t, "acme", env.Headers.TenantID)
		require.Equal(t, outbox.ReplyQueueName(p.prefix), env.Headers.ReplyTo)
		sc, ok := env.Headers.Trace()
		require.True(t, ok, "the envelope carries a trace context")
		require.Equal(t, id.String(), uuid.UUID(sc.TraceID).String(), "an untraced execution's commands share the trace derived from its id")

		// The reply came back over the broker: a published reply message for the command.
		replies, err := drv.Executor().OutboxList(ctx, &driver.OutboxListParams{Topic: outbox.ReplyQueueName(p.prefix), Limit: 10})
		require.NoError(t, err)
		require.Len(t, replies, 1)
		reply, err := outbox.Decode(replies[0].Payload)
		require.NoError(t, err)
		require.Equal(t, outbox.TypeCommandCompleted, reply.Type)
		require.Equal(t, cmd.ID, reply.CommandID)
	})
}

// TestProcessNoticesBackedOutCommandAtOnce: a process's command whose message the broker backs
// out (every delivery failed for a database reason) is parked IN_TSQ with its command_dlq row,
// and its PARKED reply parks the process at once (WAITING_FOR_TSQ, COMMAND_PARKED), long before
// the step's one-minute reply timeout.
func TestProcessNoticesBackedOutCommandAtOnce(t *testing.T) {
	drv := dbtest.Postgres(t)
	p, manager := processPlatform(t, drv)
	lift := brokertest.FailClaims(t, drv, "P-DOOMED")
	defer lift()
	ctx := context.Background()
	id, err := manager.Start(ctx, fxPaymentState{PaymentID: "P-DOOMED"})
	require.NoError(t, err)

	var inst *process.Instance[fxPaymentState]
	brokertest.WaitFor(t, "the process to wait for the operator", func() bool {
		inst, err = manager.Get(ctx, id)
		require.NoError(t, err)
		return inst.Status == driver.ExecutionWaitingForTSQ
	})
	require.Equal(t, process.CodeCommandParked, inst.ErrorCode)
	cmds, err := p.Client.ListCommands(ctx, &commandbus.ListParams{Domain: "fx", Kind: driver.CommandKindCommand})
	require.NoError(t, err)
	require.Len(t, cmds, 1)
	require.Equal(t, commandbus.StatusInTSQ, cmds[0].Status)
	entry, err := p.Client.DLQ().Get(ctx, cmds[0].ID)
	require.NoError(t, err)
	require.Contains(t, entry.Error, commandbus.CodeBrokerBackout)
	require.Contains(t, entry.Error, "simulated database failure", "the reason names the last failure")
}

// TestWorkflowCommandStepOverBroker: a workflow's command step to an amqp domain goes through the
// outbox as well; the handler gets the step key and the reply completes the step. Both drivers.
func TestWorkflowCommandStepOverBroker(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		var m *workflow.Manager
		p := newPlatform(t, platformOpts{replies: true, drv: drv, setup: func(client *commandbus.Client) {
			rt, err := orchestration.New(client, orchestration.Config{})
			require.NoError(t, err)
			m, err = workflow.Register(rt, workflow.New("fx-booking", 1).Domain("treasury").
				Command("BOOK_FX", "fx", "BookFx", func(sc *workflow.StepContext) (any, error) {
					return BookFx{PaymentID: "W-1"}, nil
				}))
			require.NoError(t, err)
		}})
		ctx := context.Background()
		id, err := m.Start(ctx, map[string]string{})
		require.NoError(t, err)
		brokertest.WaitFor(t, "the workflow to complete", func() bool {
			inst, err := m.Get(ctx, id)
			require.NoError(t, err)
			return inst.Status == driver.ExecutionCompleted
		})
		rows, err := drv.Executor().OutboxList(ctx, &driver.OutboxListParams{Topic: outbox.CommandQueueName(p.prefix, "fx", "BookFx"), Limit: 10})
		require.NoError(t, err)
		require.Len(t, rows, 1)
		env, err := outbox.Decode(rows[0].Payload)
		require.NoError(t, err)
		require.Equal(t, id.String()+":BOOK_FX", env.Headers.IdempotencyKey)
		require.Equal(t, id, env.CorrelationID)
		require.EqualValues(t, 1, p.Calls.Load())
	})
}

// fxPaymentRetried books FX with a step that retries a timed-out command once.
type fxPaymentRetried struct{}

func (fxPaymentRetried) Type() string   { return "FxPaymentRetried" }
func (fxPaymentRetried) Domain() string { return "treasury" }

func (fxPaymentRetried) Execute(x *process.Execution[fxPaymentState]) error {
	fx, err := process.CommandStep[fxPaymentState, BookFx, fxContract](x, "BOOK_FX", "fx", "BookFx",
		BookFx{PaymentID: x.State.PaymentID}, process.MaxAttempts(2), process.RetryDelay(100*time.Millisecond), process.Timeout(time.Minute))
	if err != nil {
		return err
	}
	x.State.Contract = fx.Contract
	return nil
}

// TestProcessTimeoutByWatchdogRetried: seed 004's timeout over the broker. The handler of the
// process's first command never answers; the watchdog times the command out (TIMED_OUT,
// LEASE_EXPIRED) and its TIMED_OUT reply goes back over the broker; the process's policy
// (a transient failure, one more attempt) sends a second command with the same envelope
// idempotencyKey, which completes, and the process with it.
func TestProcessTimeoutByWatchdogRetried(t *testing.T) {
	var manager *process.Manager[fxPaymentState]
	p := newPlatform(t, platformOpts{replies: true, maxAttempts: 1, lease: time.Second, setup: func(client *commandbus.Client) {
		rt, err := orchestration.New(client, orchestration.Config{})
		require.NoError(t, err)
		manager, err = process.NewManager[fxPaymentState](rt, fxPaymentRetried{})
		require.NoError(t, err)
	}})
	release := make(chan struct{})
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { close(release) }) })
	var calls atomic.Int32
	p.SetHandler(func(ctx context.Context, cmd *commandbus.Command[BookFx]) (any, error) {
		if calls.Add(1) == 1 {
			<-release // a downstream that never answers, and ignores cancellation
		}
		return fxContract{Contract: "FX-2"}, nil
	})
	ctx := context.Background()
	id, err := manager.Start(ctx, fxPaymentState{PaymentID: "P-SLOW"})
	require.NoError(t, err)
	var inst *process.Instance[fxPaymentState]
	brokertest.WaitFor(t, "the process to complete", func() bool {
		inst, err = manager.Get(ctx, id)
		require.NoError(t, err)
		return inst.Status == driver.ExecutionCompleted
	})
	require.Equal(t, "FX-2", inst.State.Contract)
	once.Do(func() { close(release) })

	cmds, err := p.Client.ListCommands(ctx, &commandbus.ListParams{Domain: "fx", Kind: driver.CommandKindCommand})
	require.NoError(t, err)
	require.Len(t, cmds, 2, "the timed-out command and its resend")
	statuses := map[commandbus.Status]*commandbus.CommandRow{}
	for _, c := range cmds {
		statuses[c.Status] = c
	}
	require.Contains(t, statuses, commandbus.StatusTimedOut)
	require.Equal(t, commandbus.CodeLeaseExpired, statuses[commandbus.StatusTimedOut].ErrorCode)
	require.Contains(t, statuses, commandbus.StatusCompleted)
	rows, err := p.drv.Executor().OutboxList(ctx, &driver.OutboxListParams{Topic: outbox.CommandQueueName(p.prefix, "fx", "BookFx"), Limit: 10})
	require.NoError(t, err)
	require.Len(t, rows, 2)
	for _, r := range rows {
		env, err := outbox.Decode(r.Payload)
		require.NoError(t, err)
		require.Equal(t, id.String()+":BOOK_FX", env.Headers.IdempotencyKey, "the same key on the resend")
	}
	replies, err := p.drv.Executor().OutboxList(ctx, &driver.OutboxListParams{Topic: outbox.ReplyQueueName(p.prefix), Limit: 10})
	require.NoError(t, err)
	var types []string
	for _, r := range replies {
		types = append(types, r.Type)
	}
	require.ElementsMatch(t, []string{string(outbox.TypeCommandTimedOut), string(outbox.TypeCommandCompleted)}, types)
}
