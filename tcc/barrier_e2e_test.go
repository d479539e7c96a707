package tcc_test

import (
	"context"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/dbtest"
	"github.com/commandbus/commandbus/orchestration"
	"github.com/commandbus/commandbus/tcc"
)

type seatCommand struct {
	Flight string `json:"flight"`
}

func (seatCommand) Kind() string { return "HoldSeat" }

type confirmSeat seatCommand

func (confirmSeat) Kind() string { return "ConfirmSeat" }

type releaseSeat seatCommand

func (releaseSeat) Kind() string { return "ReleaseSeat" }

// A command participant's handlers guard their effects with the Barrier in their own
// transactions: the transaction's phases reach the airline's holds table once each, and a phase
// delivered again afterwards changes nothing.
func TestBarrierInCommandHandlers(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		p := newParticipantDB(t, drv)
		b := tcc.NewBarrier(drv)
		handle := func(cmd *commandbus.CommandRow) (any, error) {
			branch, phase, ok := tcc.BranchOf(cmd.Headers)
			if !ok {
				return nil, commandbus.Permanent("NOT_TCC", nil)
			}
			out, err := p.deliver(b, branch, phase)
			if err != nil {
				return nil, err
			}
			return map[string]string{"seat": "12A", "barrier": string(out)}, nil
		}
		handlers := commandbus.NewHandlers()
		commandbus.AddHandler(handlers, "airline", commandbus.HandlerFunc[seatCommand](func(ctx context.Context, cmd *commandbus.Command[seatCommand]) (any, error) {
			return handle(cmd.CommandRow)
		}))
		commandbus.AddHandler(handlers, "airline", commandbus.HandlerFunc[confirmSeat](func(ctx context.Context, cmd *commandbus.Command[confirmSeat]) (any, error) {
			return handle(cmd.CommandRow)
		}))
		commandbus.AddHandler(handlers, "airline", commandbus.HandlerFunc[releaseSeat](func(ctx context.Context, cmd *commandbus.Command[releaseSeat]) (any, error) {
			return handle(cmd.CommandRow)
		}))
		client, err := commandbus.NewClient(drv, &commandbus.Config{
			Logger: slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})), Handlers: handlers, FetchPollInterval: ms(20),
			Process: commandbus.ProcessConfig{PendingPollInterval: ms(20), RetryPollInterval: ms(20), TimeoutCheckInterval: ms(20)},
			Domains: map[string]*commandbus.DomainConfig{"airline": {ConcurrentMessages: 2, MaxAttempts: 1}, "trips": {ConcurrentMessages: 4}},
		})
		require.NoError(t, err)
		rt, err := orchestration.New(client, orchestration.Config{})
		require.NoError(t, err)
		l := newLedger()
		l.failWith("hotel:TRY", func(int) error { return commandbus.BusinessRule("NO_ROOMS", "full") })
		request := func(c *tcc.Context) (any, error) { return seatCommand{Flight: "LH 400"}, nil }
		def := tcc.New("trip-barrier", 1).Domain("trips").
			CommandParticipant("seat", "airline", tcc.CommandTypes{Try: "HoldSeat", Confirm: "ConfirmSeat", Cancel: "ReleaseSeat"}, request)
		participant(l, def, "hotel")
		m, err := tcc.Register(rt, def)
		require.NoError(t, err)
		require.NoError(t, client.Start(ctx))
		t.Cleanup(func() { _ = client.Stop(context.Background()) })

		id, err := m.Start(ctx, nil, tcc.Immediate())
		require.NoError(t, err)
		inst := waitResult(t, m, id, tcc.StatusCanceled)
		require.Equal(t, "COMPLETED", inst.Result.Participant("seat").Cancel.Status)
		var held map[string]string
		require.NoError(t, inst.Result.DecodeTryResult("seat", &held))
		require.Equal(t, string(tcc.BarrierApplied), held["barrier"])

		require.Equal(t, 1, countBranch(t, p, "seat", tcc.PhaseTry), "the seat was held once")
		require.Equal(t, 1, countBranch(t, p, "seat", tcc.PhaseCancel), "and released once")
		branch := tcc.BranchID{Transaction: id.String(), Participant: "seat"}
		out, err := p.deliver(b, branch, tcc.PhaseCancel)
		require.NoError(t, err)
		require.Equal(t, tcc.BarrierDuplicate, out, "the release delivered again")
		out, err = p.deliver(b, branch, tcc.PhaseTry)
		require.NoError(t, err)
		require.Equal(t, tcc.BarrierDuplicate, out, "the hold delivered again")
		require.Equal(t, 1, countBranch(t, p, "seat", tcc.PhaseTry))
		require.Equal(t, 1, countBranch(t, p, "seat", tcc.PhaseCancel))
	})
}
