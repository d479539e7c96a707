package trip_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/examples/trip"
	"github.com/commandbus/commandbus/internal/dbtest"
	"github.com/commandbus/commandbus/orchestration"
	"github.com/commandbus/commandbus/tcc"
)

func newAgency(t *testing.T, drv driver.Driver) *trip.Agency {
	t.Helper()
	ms := func(n int) commandbus.Duration { return commandbus.Duration(time.Duration(n) * time.Millisecond) }
	client, err := commandbus.NewClient(drv, &commandbus.Config{
		Logger:  slog.New(slog.DiscardHandler),
		Process: commandbus.ProcessConfig{PendingPollInterval: ms(20), RetryPollInterval: ms(20)},
	})
	require.NoError(t, err)
	rt, err := orchestration.New(client, orchestration.Config{})
	require.NoError(t, err)
	a, err := trip.Register(rt)
	require.NoError(t, err)
	require.NoError(t, client.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, client.Stop(ctx))
	})
	return a
}

func waitFor(t *testing.T, a *trip.Agency, id uuid.UUID, want tcc.Status) *tcc.TccResult {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		res, err := a.Result(context.Background(), id)
		require.NoError(t, err)
		if res.Status == want {
			return res
		}
		if time.Now().After(deadline) {
			t.Fatalf("trip %s is %s, want %s", id, res.Status, want)
		}
		time.Sleep(10 * time.Millisecond) // polling the stored result with a deadline
	}
}

func TestTripBooking(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		a := newAgency(t, drv)

		t.Run("Confirmed", func(t *testing.T) {
			id, err := a.Start(ctx, trip.Booking{Traveller: "Ada", Flight: "LH 400", Destination: "New York", Nights: 3}, tcc.Immediate())
			require.NoError(t, err)
			res := waitFor(t, a, id, tcc.StatusConfirmed)
			var seat trip.Hold
			require.NoError(t, res.DecodeTryResult("flight", &seat))
			confirmed, _ := a.Airline.Snapshot()
			require.Contains(t, confirmed, seat.ID)
			require.Equal(t, "COMPLETED", res.Participant("car").Confirm.Status)
		})

		t.Run("NoRoomsReleasesTheSeat", func(t *testing.T) {
			id, err := a.Start(ctx, trip.Booking{Traveller: "Bob", Flight: "AT 1", Destination: "Atlantis"}, tcc.Immediate())
			require.NoError(t, err)
			res := waitFor(t, a, id, tcc.StatusCanceled)
			require.Equal(t, "hotel", res.FailedParticipant)
			require.Equal(t, tcc.PhaseTry, res.FailedPhase)
			require.Equal(t, "NO_ROOMS", res.ErrorCode)
			var seat trip.Hold
			require.NoError(t, res.DecodeTryResult("flight", &seat))
			_, released := a.Airline.Snapshot()
			require.Contains(t, released, seat.ID)
			require.Empty(t, res.Participant("car").Try.Status, "the car was never tried")
		})

		t.Run("NoCarStillATrip", func(t *testing.T) {
			id, err := a.Start(ctx, trip.Booking{Traveller: "Cy", Flight: "BA 117", Destination: "Boston", CarClass: "none"}, tcc.Immediate())
			require.NoError(t, err)
			res := waitFor(t, a, id, tcc.StatusConfirmed)
			car := res.Participant("car")
			require.Equal(t, "FAILED", car.Try.Status)
			require.Empty(t, car.Cancel.Status)
			require.Equal(t, "COMPLETED", res.Participant("hotel").Confirm.Status)
		})

		t.Run("FlakyHotelConfirmRetried", func(t *testing.T) {
			id, err := a.Start(ctx, trip.Booking{Traveller: "Flaky Fay", Flight: "AF 22", Destination: "Paris"})
			require.NoError(t, err)
			res := waitFor(t, a, id, tcc.StatusConfirmed)
			require.Equal(t, 3, res.Participant("hotel").Confirm.Attempts, "two busy answers, then confirmed")
		})

		t.Run("StuckSeatParksThenOperatorSkips", func(t *testing.T) {
			id, err := a.Start(ctx, trip.Booking{Traveller: "Stuck Stan", Flight: "AT 2", Destination: "Atlantis"}, tcc.Immediate())
			require.NoError(t, err)
			res := waitFor(t, a, id, tcc.StatusFailed)
			require.Equal(t, "flight", res.FailedParticipant)
			require.Equal(t, tcc.PhaseCancel, res.FailedPhase)
			row, err := drv.Executor().ExecutionGet(ctx, id)
			require.NoError(t, err)
			require.Equal(t, driver.ExecutionWaitingForTSQ, row.Status)
			require.NoError(t, a.Skip(ctx, id, "flight", nil, commandbus.OperatorAction{Actor: "ops:ada", Reason: "seat released by phone"}))
			res = waitFor(t, a, id, tcc.StatusCanceled)
			require.Equal(t, "SKIPPED", res.Participant("flight").Cancel.Status)
		})
	})
}
