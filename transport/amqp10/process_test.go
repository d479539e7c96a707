package amqp10_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	amqp "github.com/Azure/go-amqp"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/dbtest"
	"github.com/commandbus/commandbus/internal/rabbittest"
	"github.com/commandbus/commandbus/orchestration"
	"github.com/commandbus/commandbus/outbox"
	"github.com/commandbus/commandbus/process"
	"github.com/commandbus/commandbus/transport/amqp10"
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
		}, false)
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

// TestForeignHandlerOverAMQP10: a handler outside this deployment that speaks only the envelope
// over AMQP 1.0 (as an IBM MQ application behind its AMQP channel would) completes a process's
// command: it receives the CommandRequested JSON and sends a CommandCompleted envelope to the
// message's reply-to with the command id as correlation id. The command row completes and the
// process resumes with the result.
func TestForeignHandlerOverAMQP10(t *testing.T) {
	var manager *process.Manager[fxPaymentState]
	p := newPlatformOn(t, true, dbtest.Postgres(t), func(client *commandbus.Client) {
		rt, err := orchestration.New(client, orchestration.Config{})
		require.NoError(t, err)
		manager, err = process.NewManager[fxPaymentState](rt, fxPayment{})
		require.NoError(t, err)
	}, true)
	ctx := context.Background()
	id, err := manager.Start(ctx, fxPaymentState{PaymentID: "P-MQ"})
	require.NoError(t, err)
	queue := outbox.CommandQueueName(p.prefix, "fx", "BookFx")
	t.Cleanup(func() { brokertest.DeleteQueues(t, p.url, queue, outbox.BackoutQueueName(queue)) })

	msg := readQueue(t, p.url, queue, 1)[0]
	var command map[string]any
	require.NoError(t, json.Unmarshal(msg.GetData(), &command))
	headers := command["headers"].(map[string]any)
	require.Equal(t, id.String()+":BOOK_FX", headers["idempotencyKey"])
	require.Equal(t, command["commandId"], msg.Properties.CorrelationID)
	replyTo := *msg.Properties.ReplyTo
	reply, err := json.Marshal(map[string]any{
		"messageId": uuid.NewString(), "type": "CommandCompleted", "name": command["name"], "commandId": command["commandId"],
		"correlationId": command["correlationId"], "occurredAt": time.Now().UTC().Format(time.RFC3339Nano),
		"headers": map[string]any{"schemaVersion": headers["schemaVersion"]}, "payload": map[string]any{"contract": "FX-MQ"},
	})
	require.NoError(t, err)
	conn, err := rabbittest.DialAMQP10(p.url)
	require.NoError(t, err)
	defer conn.Close()
	sess, err := conn.NewSession(ctx, nil)
	require.NoError(t, err)
	sender, err := sess.NewSender(ctx, amqp10.DetectAddressStyle(conn.Properties()).Address(replyTo), nil)
	require.NoError(t, err)
	messageID := uuid.NewString()
	require.NoError(t, sender.Send(ctx, &amqp.Message{Data: [][]byte{reply}, Header: &amqp.MessageHeader{Durable: true},
		Properties: &amqp.MessageProperties{MessageID: messageID, CorrelationID: command["commandId"]}}, nil))

	var inst *process.Instance[fxPaymentState]
	brokertest.WaitFor(t, "the process to complete", func() bool {
		inst, err = manager.Get(ctx, id)
		require.NoError(t, err)
		return inst.Status == driver.ExecutionCompleted
	})
	require.Equal(t, "FX-MQ", inst.State.Contract)
	commandID, err := uuid.Parse(command["commandId"].(string))
	require.NoError(t, err)
	row, err := p.Client.GetCommand(ctx, commandID)
	require.NoError(t, err)
	require.Equal(t, commandbus.StatusCompleted, row.Status)
}
