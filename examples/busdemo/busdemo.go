// Package busdemo is a small command-bus demonstration: an FX domain whose handler books
// contracts against a flaky simulated provider, and a payments domain that receives the replies.
// It shows retries, the troubleshooting queue and replies with nothing but the command bus.
package busdemo

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/commandbus/commandbus"
)

// BookFx asks the FX domain to book a contract.
type BookFx struct {
	PaymentID string `json:"paymentId"`
	Amount    string `json:"amount"`
	From      string `json:"from"`
	To        string `json:"to"`
}

// Kind is the stable command type.
func (BookFx) Kind() string { return "BookFx" }

// Behavior sets how often the simulated FX provider misbehaves, in percent.
type Behavior struct {
	TransientPct float64
	PermanentPct float64
	BusinessPct  float64
	MaxDelay     time.Duration
}

// Demo holds the handlers and what they observed.
type Demo struct {
	behavior Behavior
	mu       sync.Mutex
	rng      *rand.Rand
	replies  atomic.Int64
	booked   sync.Map // idempotency key -> contract, so a redelivery books nothing twice
}

// New returns a demo whose provider misbehaves as b says, drawing from seed.
func New(b Behavior, seed uint64) *Demo {
	return &Demo{behavior: b, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

// Register adds the FX handler and the payments reply handler.
func (d *Demo) Register(h *commandbus.Handlers) {
	commandbus.AddHandler(h, "fx", commandbus.HandlerFunc[BookFx](d.bookFx))
	commandbus.AddReplyHandler(h, "payments", "", func(ctx context.Context, msg *commandbus.ReplyMessage) error {
		d.replies.Add(1)
		return nil
	})
}

// Replies is how many replies the payments domain has received.
func (d *Demo) Replies() int64 { return d.replies.Load() }

func (d *Demo) roll() (float64, time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var delay time.Duration
	if d.behavior.MaxDelay > 0 {
		delay = time.Duration(d.rng.Int64N(int64(d.behavior.MaxDelay)))
	}
	return d.rng.Float64() * 100, delay
}

func (d *Demo) bookFx(ctx context.Context, cmd *commandbus.Command[BookFx]) (any, error) {
	key := cmd.IdempotencyKey()
	if contract, ok := d.booked.Load(key); ok {
		return map[string]string{"contract": contract.(string)}, nil
	}
	roll, delay := d.roll()
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(delay):
	}
	b := d.behavior
	switch {
	case roll < b.PermanentPct:
		return nil, commandbus.Permanent("CURRENCY_PAIR_SUSPENDED", fmt.Errorf("%s/%s is suspended by the provider", cmd.Args.From, cmd.Args.To))
	case roll < b.PermanentPct+b.TransientPct:
		return nil, commandbus.Transient(errors.New("FX provider timed out"))
	case roll < b.PermanentPct+b.TransientPct+b.BusinessPct:
		return nil, commandbus.BusinessRule("RATE_EXPIRED", "quoted rate expired before booking")
	}
	contract := "FX-" + cmd.ID.String()[:8]
	d.booked.Store(key, contract)
	return map[string]string{"contract": contract, "rate": "1.0842"}, nil
}
