package tcc_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/dbtest"
	"github.com/commandbus/commandbus/orchestration"
	"github.com/commandbus/commandbus/tcc"
)

type roomRequest struct {
	City string `json:"city"`
	Hold string `json:"hold,omitempty"`
}

// A participant whose phases are commands to another domain: each phase's command goes out
// with the checkpoint that records it, the transaction waits for the reply without a goroutine,
// the try's reply result reaches the confirm and the cancel, and the handler finds the branch in
// the headers.
func TestCommandParticipant(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		var mu sync.Mutex
		var calls []string
		handle := func(kind string) commandbus.HandlerFunc[roomRequest] {
			return func(ctx context.Context, cmd *commandbus.Command[roomRequest]) (any, error) {
				branch, phase, ok := tcc.BranchOf(cmd.Headers)
				mu.Lock()
				calls = append(calls, kind+" "+string(phase)+" "+branch.Participant+" "+cmd.Args.Hold)
				mu.Unlock()
				if !ok {
					return nil, commandbus.Permanent("NOT_TCC", nil)
				}
				if kind == "HoldRoom" && cmd.Args.City == "Atlantis" {
					return nil, commandbus.BusinessRule("NO_ROOMS", "no room in Atlantis")
				}
				return map[string]string{"hold": "R-" + branch.Transaction[len(branch.Transaction)-4:]}, nil
			}
		}
		handlers := commandbus.NewHandlers()
		commandbus.AddHandler(handlers, "hotels", handle("HoldRoom"))
		commandbus.AddHandler(handlers, "hotels", commandbus.HandlerFunc[confirmRoom](func(ctx context.Context, cmd *commandbus.Command[confirmRoom]) (any, error) {
			return handle("ConfirmRoom")(ctx, &commandbus.Command[roomRequest]{CommandRow: cmd.CommandRow, Args: roomRequest(cmd.Args)})
		}))
		commandbus.AddHandler(handlers, "hotels", commandbus.HandlerFunc[releaseRoom](func(ctx context.Context, cmd *commandbus.Command[releaseRoom]) (any, error) {
			return handle("ReleaseRoom")(ctx, &commandbus.Command[roomRequest]{CommandRow: cmd.CommandRow, Args: roomRequest(cmd.Args)})
		}))
		client, err := commandbus.NewClient(drv, &commandbus.Config{
			Logger: slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})), Handlers: handlers, FetchPollInterval: ms(20),
			Process: commandbus.ProcessConfig{PendingPollInterval: ms(20), RetryPollInterval: ms(20), TimeoutCheckInterval: ms(20)},
			Domains: map[string]*commandbus.DomainConfig{"hotels": {ConcurrentMessages: 4, MaxAttempts: 1}, "trips": {ConcurrentMessages: 4}},
		})
		require.NoError(t, err)
		rt, err := orchestration.New(client, orchestration.Config{})
		require.NoError(t, err)
		l := newLedger()
		def := tcc.New("trip-commands", 1).Domain("trips")
		participant(l, def, "flight")
		def.CommandParticipant("hotel", "hotels", tcc.CommandTypes{Try: "HoldRoom", Confirm: "ConfirmRoom", Cancel: "ReleaseRoom"},
			func(c *tcc.Context) (any, error) {
				var in roomRequest
				if err := c.DecodeInput(&in); err != nil {
					return nil, err
				}
				if c.Phase != tcc.PhaseTry {
					var held map[string]string
					if err := c.DecodeTryResult(&held); err != nil {
						return nil, err
					}
					in.Hold = held["hold"]
				}
				return in, nil
			})
		participant(l, def, "car")
		m, err := tcc.Register(rt, def)
		require.NoError(t, err)
		require.NoError(t, client.Start(ctx))
		t.Cleanup(func() { _ = client.Stop(context.Background()) })

		id, err := m.Start(ctx, roomRequest{City: "Lisbon"}, tcc.Immediate())
		require.NoError(t, err)
		inst := waitResult(t, m, id, tcc.StatusConfirmed)
		hold := "R-" + id.String()[len(id.String())-4:]
		var got map[string]string
		require.NoError(t, inst.Result.DecodeTryResult("hotel", &got))
		require.Equal(t, hold, got["hold"], "the try's result is its reply's result")
		mu.Lock()
		require.Equal(t, []string{"HoldRoom TRY hotel ", "ConfirmRoom CONFIRM hotel " + hold}, calls, "one command per phase; the confirm carries the try's result")
		calls = nil
		mu.Unlock()
		seq := l.sequence()
		require.Equal(t, []string{"flight:TRY", "car:TRY"}, seq[:2], "the local participants around it, tries in order")
		require.ElementsMatch(t, []string{"flight:CONFIRM", "car:CONFIRM"}, seq[2:])

		refused, err := m.Start(ctx, roomRequest{City: "Atlantis"})
		require.NoError(t, err)
		inst = waitResult(t, m, refused, tcc.StatusCanceled)
		require.Equal(t, "hotel", inst.Result.FailedParticipant)
		require.Equal(t, "NO_ROOMS", inst.Result.ErrorCode)
		require.Equal(t, 1, l.count("flight:CANCEL"))
		mu.Lock()
		require.Equal(t, []string{"HoldRoom TRY hotel "}, calls, "a refused try is not cancelled")
		mu.Unlock()
	})
}

type confirmRoom roomRequest

func (confirmRoom) Kind() string { return "ConfirmRoom" }

type releaseRoom roomRequest

func (releaseRoom) Kind() string { return "ReleaseRoom" }

func (roomRequest) Kind() string { return "HoldRoom" }
