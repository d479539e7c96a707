package amqp10_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/dbtest"
	"github.com/commandbus/commandbus/orchestration"
	"github.com/commandbus/commandbus/outbox"
	"github.com/commandbus/commandbus/process"
	"github.com/commandbus/commandbus/transport/internal/brokertest"
)

type fxPaymentState struct {
	PaymentID string `json:"paymentId"`
	Contract  string `json:"contract,omitempty"`
}

type fxContract struct {
	Contract string `json:"contract"`
}

// fxPayment books FX with a command step to the fx domain, whose transport is amqp10.
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

// TestProcessCommandStepOverAMQP10: a process's command step to an amqp10 domain goes out
// through the outbox over AMQP 1.0, the consumer runs it, and its reply, back over the AMQP 1.0
// reply queue, resumes the process. Both drivers.
func TestProcessCommandStepOverAMQP10(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		var manager *process.Manager[fxPaymentState]
		p := newPlatformOn(t, true, drv, func(client *commandbus.Client) {
			rt, err := orchestration.New(client, orchestration.Config{})
			require.NoError(t, err)
			manager, err = process.NewManager[fxPaymentState](rt, fxPayment{})
			require.NoError(t, err)
		})
		ctx := context.Background()
		id, err := manager.Start(ctx, fxPaymentState{PaymentID: "P-10"}, process.WithTenant("acme"))
		require.NoError(t, err)
		var inst *process.Instance[fxPaymentState]
		brokertest.WaitFor(t, "the process to complete", func() bool {
			inst, err = manager.Get(ctx, id)
			require.NoError(t, err)
			return inst.Status == driver.ExecutionCompleted
		})
		require.Equal(t, "FX-P-10", inst.State.Contract)
		rows, err := drv.Executor().OutboxList(ctx, &driver.OutboxListParams{Transport: outbox.TransportAMQP10, Topic: outbox.CommandQueueName(p.prefix, "fx", "BookFx")})
		require.NoError(t, err)
		require.Len(t, rows, 1)
		env, err := outbox.Decode(rows[0].Payload)
		require.NoError(t, err)
		require.Equal(t, id.String()+":BOOK_FX", env.Headers.IdempotencyKey)
		require.Equal(t, "acme", env.Headers.TenantID)
	})
}
