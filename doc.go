// Package commandbus is a command bus and durable execution engine on PostgreSQL (and embedded
// SQLite), built first for payments.
//
// A command is sent to a domain's queue and handled by that domain's worker pool; its reply goes
// to the replyTo domain's reply queue. Sending is durable acceptance: when Send returns, the
// command exists. Delivery is at least once; handlers guard their effects with the command's
// idempotency key, and a fence counter makes sure a handler that lost its lease cannot record an
// outcome. Every command ends COMPLETED, FAILED, CANCELLED or TIMED_OUT, or waits visibly in the
// troubleshooting queue (TSQ) for an operator.
//
// The story in code:
//
//	type BookFx struct{ Amount string `json:"amount"` }
//	func (BookFx) Kind() string { return "BookFx" }
//
//	handlers := commandbus.NewHandlers()
//	commandbus.AddHandler(handlers, "fx", commandbus.HandlerFunc[BookFx](
//		func(ctx context.Context, cmd *commandbus.Command[BookFx]) (any, error) {
//			return map[string]string{"contract": "FX-1"}, nil
//		}))
//
//	client, err := commandbus.NewClient(drv, &commandbus.Config{
//		Handlers: handlers,
//		Domains:  map[string]*commandbus.DomainConfig{"fx": {ConcurrentMessages: 2}},
//	})
//	err = client.Start(ctx)
//	res, err := client.Send(ctx, "fx", BookFx{Amount: "10.00"}, &commandbus.SendOpts{ReplyTo: "payments"})
//	defer client.Stop(ctx)
//
// Handler errors are classified with errors.As: a BusinessRuleError ends the command FAILED with
// a failure reply, a PermanentError sends it to the TSQ at once, anything else is retried with
// exponential backoff and jitter until its attempts run out, then goes to the TSQ.
package commandbus
