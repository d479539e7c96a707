package payments

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/orchestration"
	"github.com/commandbus/commandbus/process"
)

// TypeDailyRun is the process that runs a day's scheduled payments (RunScheduledPaymentsForDay).
// The platform declares the schedule DailyRunSchedule for it on the runtime; a scheduler
// (package schedule) creates and fires it, and the console shows and pauses it.
const TypeDailyRun = "run-scheduled-payments"

// DailyRunSchedule is the name of the platform's daily schedule of TypeDailyRun.
const DailyRunSchedule = "payments-daily-run"

// Default time of the daily run: 06:00 in London, every day.
const (
	DefaultDailyRunCron = "0 0 6 * * *"
	DefaultDailyRunZone = "Europe/London"
)

// DailyRunState is the daily run's input and outcome. Day defaults to the day the run starts
// (the platform's clock, in UTC); ProcessType to TypePaymentManager.
type DailyRunState struct {
	Day         string `json:"day,omitempty"`
	ProcessType string `json:"processType,omitempty"`
	// BatchID and Payments are the batch the run created and its size (none when no payment was
	// scheduled for the day).
	BatchID  string `json:"batchId,omitempty"`
	Payments int    `json:"payments"`
}

type dailyRunProcess struct{ p *Platform }

func (dailyRunProcess) Type() string   { return TypeDailyRun }
func (dailyRunProcess) Domain() string { return DomainPayments }

type dailyRunResult struct {
	BatchID  string `json:"batchId,omitempty"`
	Payments int    `json:"payments"`
}

// Execute picks the day (recorded, so a replay runs the same day), then runs the day's scheduled
// payments: one batch, one payment process each. A day without scheduled payments ends with none.
func (d dailyRunProcess) Execute(x *process.Execution[DailyRunState]) error {
	day := x.State.Day
	if day == "" {
		var err error
		if day, err = process.Step(x, "pickDay", func(context.Context) (string, error) {
			return d.p.now().UTC().Format(time.DateOnly), nil
		}); err != nil {
			return err
		}
		x.State.Day = day
	}
	typ := x.State.ProcessType
	if typ == "" {
		typ = TypePaymentManager
	}
	res, err := process.Step(x, "runScheduledPayments", func(ctx context.Context) (dailyRunResult, error) {
		batch, err := d.p.RunScheduledPaymentsForDay(ctx, day, typ, nil)
		var invalid *commandbus.ValidationError
		if errors.As(err, &invalid) && invalid.Field == "day" {
			return dailyRunResult{}, nil // nothing scheduled for the day (or run already)
		}
		if err != nil {
			return dailyRunResult{}, err
		}
		return dailyRunResult{BatchID: batch.ID.String(), Payments: batch.Total}, nil
	})
	x.State.BatchID, x.State.Payments = res.BatchID, res.Payments
	return err
}

// registerDailyRun registers the daily run and declares its schedule.
func (p *Platform) registerDailyRun(opts Options) error {
	m, err := process.NewManager(p.rt, process.Process[DailyRunState](dailyRunProcess{p: p}))
	if err != nil {
		return err
	}
	p.dailyRun = m
	input, _ := json.Marshal(DailyRunState{ProcessType: TypePaymentManager})
	return p.rt.DeclareSchedule(process.Model, TypeDailyRun, orchestration.ScheduleSpec{
		Name: DailyRunSchedule, Cron: opts.DailyRunCron, Zone: opts.DailyRunZone, Input: input,
		Description: "RunScheduledPaymentsForDay: the day's scheduled payments, one batch",
	})
}

// RunDailyNow starts the daily run for day ("" for today) and returns its execution id; the
// runtime's runners run it.
func (p *Platform) RunDailyNow(ctx context.Context, day string) (string, error) {
	id, err := p.dailyRun.Start(ctx, DailyRunState{Day: day, ProcessType: TypePaymentManager})
	return id.String(), err
}
