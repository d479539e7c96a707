package commandbus_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver/sqlitedriver"
	"github.com/commandbus/commandbus/migrate"
)

// BookFx asks the fx domain to book a currency exchange.
type BookFx struct {
	PaymentID string `json:"paymentId"`
	Amount    string `json:"amount"`
}

// Kind is the persisted command type: keep it stable when renaming the Go type.
func (BookFx) Kind() string { return "BookFx" }

// openExampleDatabase opens a migrated SQLite database in a temporary directory and returns it
// with a function that closes and removes it.
func openExampleDatabase() (*sqlitedriver.Driver, func()) {
	dir, err := os.MkdirTemp("", "commandbus-example-")
	if err != nil {
		log.Fatal(err)
	}
	drv, err := sqlitedriver.Open(filepath.Join(dir, "app.db"), nil)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := migrate.New(drv, nil).Up(context.Background()); err != nil {
		log.Fatal(err)
	}
	return drv, func() {
		_ = drv.Close()
		_ = os.RemoveAll(dir)
	}
}

// A command sent with ReplyTo is handled by its domain's handler, and the outcome comes back as
// a reply to the sender's domain.
func ExampleClient_Send() {
	ctx := context.Background()
	drv, cleanup := openExampleDatabase()
	defer cleanup()

	handlers := commandbus.NewHandlers()
	commandbus.AddHandler(handlers, "fx", commandbus.HandlerFunc[BookFx](
		func(ctx context.Context, cmd *commandbus.Command[BookFx]) (any, error) {
			// Delivery is at least once: a real handler guards its side effect with
			// cmd.IdempotencyKey().
			return map[string]string{"contract": "FX-" + cmd.Args.PaymentID}, nil
		}))
	replies := make(chan commandbus.Reply, 1)
	commandbus.AddReplyHandler(handlers, "payments", "BookFx", func(ctx context.Context, msg *commandbus.ReplyMessage) error {
		replies <- msg.Reply
		return nil
	})

	client, err := commandbus.NewClient(drv, &commandbus.Config{
		Handlers: handlers,
		Logger:   slog.New(slog.DiscardHandler),
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := client.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer client.Stop(ctx)

	sent, err := client.Send(ctx, "fx", BookFx{PaymentID: "PAY-1", Amount: "100.00"},
		&commandbus.SendOpts{ReplyTo: "payments"})
	if err != nil {
		log.Fatal(err)
	}

	select {
	case reply := <-replies:
		var result map[string]string
		_ = json.Unmarshal(reply.Result, &result)
		fmt.Println("reply for the sent command:", reply.CommandID == sent.ID)
		fmt.Println("outcome:", reply.Outcome)
		fmt.Println("contract:", result["contract"])
	case <-time.After(30 * time.Second):
		fmt.Println("no reply")
	}
	// Output:
	// reply for the sent command: true
	// outcome: SUCCESS
	// contract: FX-PAY-1
}

// A handler rejects a command on a business rule by returning commandbus.BusinessRule: the
// command ends FAILED, is not retried, and the sender gets a FAILED reply with the code.
func ExampleBusinessRule() {
	ctx := context.Background()
	drv, cleanup := openExampleDatabase()
	defer cleanup()

	handlers := commandbus.NewHandlers()
	commandbus.AddHandler(handlers, "fx", commandbus.HandlerFunc[BookFx](
		func(ctx context.Context, cmd *commandbus.Command[BookFx]) (any, error) {
			return nil, commandbus.BusinessRule("RATE_EXPIRED", "quoted rate expired before booking")
		}))
	replies := make(chan commandbus.Reply, 1)
	commandbus.AddReplyHandler(handlers, "payments", "", func(ctx context.Context, msg *commandbus.ReplyMessage) error {
		replies <- msg.Reply
		return nil
	})

	client, err := commandbus.NewClient(drv, &commandbus.Config{
		Handlers: handlers,
		Logger:   slog.New(slog.DiscardHandler),
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := client.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer client.Stop(ctx)

	sent, err := client.Send(ctx, "fx", BookFx{PaymentID: "PAY-2", Amount: "250.00"},
		&commandbus.SendOpts{ReplyTo: "payments"})
	if err != nil {
		log.Fatal(err)
	}

	select {
	case reply := <-replies:
		fmt.Println("outcome:", reply.Outcome)
		fmt.Println("error:", reply.ErrorCode, "-", reply.ErrorMessage)
	case <-time.After(30 * time.Second):
		fmt.Println("no reply")
	}
	cmd, err := client.GetCommand(ctx, sent.ID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("command:", cmd.Status, "after", cmd.Attempt, "attempt")
	// Output:
	// outcome: FAILED
	// error: RATE_EXPIRED - quoted rate expired before booking
	// command: FAILED after 1 attempt
}
