// Package trip is the reference TCC transaction: a trip booking that reserves a flight seat, a
// hotel room and a rental car, then confirms all three, or releases what it reserved. The car is
// optional: a trip without a car is still a trip. The providers are simulated in memory, driven
// by the booking's data, so every path can be shown:
//
//   - the destination "Atlantis" has no hotel rooms: the hotel's try fails (a business failure),
//     the flight seat held before is released, and the trip ends CANCELED;
//   - the car class "none" finds no car: the optional car's try fails and the trip is confirmed
//     without it;
//   - a traveller whose name contains "flaky" meets a hotel that fails its confirm twice before
//     it succeeds (durable retries);
//   - a traveller whose name contains "stuck" holds a seat the airline will not release: when
//     the trip is cancelled (Atlantis), the flight's cancel fails, and the trip waits in the
//     troubleshooting queue (result FAILED) for an operator's retry or skip.
//
// Every phase is idempotent per branch (transaction and participant), as a real provider's
// would be: the holds are keyed by Context.Branch. Participants that run in this module's
// handlers get the same guarantees in their own database from tcc.Barrier.
package trip

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/orchestration"
	"github.com/commandbus/commandbus/tcc"
)

// Type is the TCC transaction type.
const Type = "TripBooking"

// Booking is the transaction's input.
type Booking struct {
	Traveller   string `json:"traveller"`
	Flight      string `json:"flight"`
	Destination string `json:"destination"`
	Nights      int    `json:"nights"`
	// CarClass is the rental car wanted ("" is the economy class; "none" finds no car).
	CarClass string `json:"carClass"`
}

// Hold is what a try reserved: the provider's hold id.
type Hold struct {
	ID string `json:"id"`
}

// Provider is a simulated provider: holds, confirmed and released bookings by branch.
type Provider struct {
	name      string
	mu        sync.Mutex
	holds     map[string]string // branch → hold id
	Confirmed []string          // hold ids confirmed, in order
	Released  []string          // hold ids released, in order
	confirmed map[string]bool
	released  map[string]bool
	failures  map[string]int // branch → confirm failures so far (the flaky hotel)
}

func newProvider(name string) *Provider {
	return &Provider{name: name, holds: map[string]string{}, confirmed: map[string]bool{}, released: map[string]bool{}, failures: map[string]int{}}
}

func (p *Provider) hold(branch tcc.BranchID) Hold {
	p.mu.Lock()
	defer p.mu.Unlock()
	key := branch.Transaction + "/" + branch.Participant
	id, ok := p.holds[key]
	if !ok {
		id = fmt.Sprintf("%s-%s", p.name, branch.Transaction[len(branch.Transaction)-8:])
		p.holds[key] = id
	}
	return Hold{ID: id}
}

func (p *Provider) confirm(h Hold) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.confirmed[h.ID] {
		p.confirmed[h.ID] = true
		p.Confirmed = append(p.Confirmed, h.ID)
	}
}

func (p *Provider) release(h Hold) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.released[h.ID] {
		p.released[h.ID] = true
		p.Released = append(p.Released, h.ID)
	}
}

// Snapshot returns the confirmed and released hold ids.
func (p *Provider) Snapshot() (confirmed, released []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.Confirmed...), append([]string(nil), p.Released...)
}

// Agency is a registered trip booking TCC with its simulated providers.
type Agency struct {
	*tcc.Manager
	Airline, Hotels, Cars *Provider
}

// Register registers the trip booking TCC with the runtime.
func Register(rt *orchestration.Runtime) (*Agency, error) {
	a := &Agency{Airline: newProvider("seat"), Hotels: newProvider("room"), Cars: newProvider("car")}
	m, err := tcc.Register(rt, a.Definition())
	if err != nil {
		return nil, err
	}
	a.Manager = m
	return a, nil
}

// Definition returns the trip booking with its phases bound to a's providers.
func (a *Agency) Definition() *tcc.Definition {
	retry := tcc.RetryPolicy{MaxAttempts: 4, InitialDelay: 200 * time.Millisecond, MaxDelay: 2 * time.Second, Jitter: 0.2}
	return tcc.New(Type, 1).
		Describe("Hold a flight seat, a hotel room and (optionally) a car; confirm all, or release what was held").
		Domain("travel").
		DefaultRetry(retry).
		DefaultTimeout(10*time.Second).
		Participant("flight", a.tryFlight, a.confirmFlight, a.cancelFlight, tcc.TryTimeout(5*time.Second)).
		Participant("hotel", a.tryHotel, a.confirmHotel, a.cancelHotel).
		Participant("car", a.tryCar, a.confirmCar, a.cancelCar, tcc.Optional())
}

func booking(c *tcc.Context) (Booking, error) {
	var b Booking
	if err := c.DecodeInput(&b); err != nil {
		return b, commandbus.Permanent("BAD_BOOKING", err)
	}
	return b, nil
}

func held(c *tcc.Context) (Hold, error) {
	var h Hold
	if err := c.DecodeTryResult(&h); err != nil {
		return h, commandbus.Permanent("NO_HOLD", err)
	}
	return h, nil
}

func (a *Agency) tryFlight(_ context.Context, c *tcc.Context) (any, error) {
	b, err := booking(c)
	if err != nil {
		return nil, err
	}
	if b.Flight == "" {
		return nil, commandbus.BusinessRule("NO_FLIGHT", "the booking names no flight")
	}
	return a.Airline.hold(c.Branch()), nil
}

func (a *Agency) confirmFlight(_ context.Context, c *tcc.Context) error {
	h, err := held(c)
	if err == nil {
		a.Airline.confirm(h)
	}
	return err
}

func (a *Agency) cancelFlight(_ context.Context, c *tcc.Context) error {
	b, err := booking(c)
	if err != nil {
		return err
	}
	if strings.Contains(strings.ToLower(b.Traveller), "stuck") {
		return commandbus.Permanent("AIRLINE_REFUSED", errors.New("the airline refuses to release the seat"))
	}
	h, err := held(c)
	if err == nil {
		a.Airline.release(h)
	}
	return err
}

func (a *Agency) tryHotel(_ context.Context, c *tcc.Context) (any, error) {
	b, err := booking(c)
	if err != nil {
		return nil, err
	}
	if strings.EqualFold(b.Destination, "Atlantis") {
		return nil, commandbus.BusinessRule("NO_ROOMS", "no hotel room in "+b.Destination)
	}
	return a.Hotels.hold(c.Branch()), nil
}

func (a *Agency) confirmHotel(_ context.Context, c *tcc.Context) error {
	b, err := booking(c)
	if err != nil {
		return err
	}
	h, err := held(c)
	if err != nil {
		return err
	}
	if strings.Contains(strings.ToLower(b.Traveller), "flaky") {
		a.Hotels.mu.Lock()
		a.Hotels.failures[h.ID]++
		n := a.Hotels.failures[h.ID]
		a.Hotels.mu.Unlock()
		if n <= 2 {
			return commandbus.Transient(fmt.Errorf("the hotel's booking system is busy (attempt %d)", c.Attempt))
		}
	}
	a.Hotels.confirm(h)
	return nil
}

func (a *Agency) cancelHotel(_ context.Context, c *tcc.Context) error {
	h, err := held(c)
	if err == nil {
		a.Hotels.release(h)
	}
	return err
}

func (a *Agency) tryCar(_ context.Context, c *tcc.Context) (any, error) {
	b, err := booking(c)
	if err != nil {
		return nil, err
	}
	switch strings.ToLower(b.CarClass) {
	case "none":
		return nil, commandbus.BusinessRule("NO_CARS", "no car left")
	}
	return a.Cars.hold(c.Branch()), nil
}

func (a *Agency) confirmCar(_ context.Context, c *tcc.Context) error {
	h, err := held(c)
	if err == nil {
		a.Cars.confirm(h)
	}
	return err
}

func (a *Agency) cancelCar(_ context.Context, c *tcc.Context) error {
	h, err := held(c)
	if err == nil {
		a.Cars.release(h)
	}
	return err
}
