package amqp_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"
	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/dbtest"
	"github.com/commandbus/commandbus/outbox"
	"github.com/commandbus/commandbus/process"
	"github.com/commandbus/commandbus/transport/internal/brokertest"
)

// TestForeignHandlerCompletesCommand: a handler written in another language, which knows only
// the envelope on the queues (no database, no library), completes a process's command: it reads
// the CommandRequested JSON from the command queue and publishes a CommandCompleted envelope
// whose payload is its result to the reply-to the command named. The command row ends COMPLETED
// and the process resumes with the result.
func TestForeignHandlerCompletesCommand(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		p, manager := processPlatformOpts(t, platformOpts{replies: true, drv: drv, foreignFx: true})
		ctx := context.Background()
		id, err := manager.Start(ctx, fxPaymentState{PaymentID: "P-EXT"}, process.WithTenant("acme"))
		require.NoError(t, err)

		// The foreign handler: raw AMQP 0-9-1 and JSON maps.
		queue := outbox.CommandQueueName(p.prefix, "fx", "BookFx")
		t.Cleanup(func() { brokertest.DeleteQueues(t, p.url, queue, outbox.BackoutQueueName(queue)) })
		msg := readQueue(t, p.url, queue, 1)[0]
		var command map[string]any
		require.NoError(t, json.Unmarshal(msg.Body, &command))
		require.Equal(t, "CommandRequested", command["type"])
		headers := command["headers"].(map[string]any)
		require.Equal(t, id.String()+":BOOK_FX", headers["idempotencyKey"])
		require.Equal(t, "P-EXT", command["payload"].(map[string]any)["paymentId"])
		replyTo := headers["replyTo"].(string)
		require.Equal(t, replyTo, msg.ReplyTo, "the AMQP reply-to is the envelope's")
		require.Equal(t, command["commandId"], msg.CorrelationId, "the AMQP correlation id is the command id")

		reply, err := json.Marshal(map[string]any{
			"messageId": uuid.NewString(), "type": "CommandCompleted", "name": command["name"],
			"commandId": command["commandId"], "correlationId": command["correlationId"], "causationId": command["messageId"],
			"occurredAt": time.Now().UTC().Format(time.RFC3339Nano),
			"headers":    map[string]any{"schemaVersion": headers["schemaVersion"], "tenantId": headers["tenantId"]},
			"payload":    map[string]any{"contract": "FX-EXT"},
		})
		require.NoError(t, err)
		conn, err := amqp091.Dial(p.url)
		require.NoError(t, err)
		defer conn.Close()
		ch, err := conn.Channel()
		require.NoError(t, err)
		require.NoError(t, ch.PublishWithContext(ctx, "", replyTo, false, false, amqp091.Publishing{
			ContentType: "application/json", DeliveryMode: amqp091.Persistent, MessageId: uuid.NewString(),
			CorrelationId: msg.CorrelationId, Body: reply,
		}))

		var inst *process.Instance[fxPaymentState]
		brokertest.WaitFor(t, "the process to complete", func() bool {
			inst, err = manager.Get(ctx, id)
			require.NoError(t, err)
			return inst.Status == driver.ExecutionCompleted
		})
		require.Equal(t, "FX-EXT", inst.State.Contract)
		commandID, err := uuid.Parse(command["commandId"].(string))
		require.NoError(t, err)
		row, err := p.Client.GetCommand(ctx, commandID)
		require.NoError(t, err)
		require.Equal(t, "COMPLETED", string(row.Status), "the reply completed the command row")
	})
}
