package console_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/examples/trip"
	"github.com/commandbus/commandbus/internal/dbtest"
	"github.com/commandbus/commandbus/internal/servertest"
	"github.com/commandbus/commandbus/orchestration"
	. "github.com/commandbus/commandbus/server"
	"github.com/commandbus/commandbus/tcc"
)

// tccFixture serves the console and the REST API of a runtime that runs the trip booking TCC.
type tccFixture struct {
	*consoleFixture
	agency *trip.Agency
}

func setupTccConsole(t *testing.T, drv driver.Driver) *tccFixture {
	t.Helper()
	ms := func(n int) commandbus.Duration { return commandbus.Duration(time.Duration(n) * time.Millisecond) }
	client, err := commandbus.NewClient(drv, &commandbus.Config{
		Logger:  slog.New(slog.NewTextHandler(servertest.LogWriter{T: t}, &slog.HandlerOptions{Level: slog.LevelError})),
		Process: commandbus.ProcessConfig{PendingPollInterval: ms(50), RetryPollInterval: ms(50)},
	})
	require.NoError(t, err)
	rt, err := orchestration.New(client, orchestration.Config{})
	require.NoError(t, err)
	agency, err := trip.Register(rt)
	require.NoError(t, err)
	require.NoError(t, client.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, client.Stop(ctx))
	})
	srv, err := New(Config{Client: client, Runtime: rt, Tokens: testTokens})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, srv.Close()) })
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	return &tccFixture{consoleFixture: &consoleFixture{&servertest.Fixture{T: t, Client: client, Server: srv, HTTP: hs}}, agency: agency}
}

// book starts a trip and waits for its outcome.
func (f *tccFixture) book(b trip.Booking, want tcc.Status) uuid.UUID {
	f.T.Helper()
	id, err := f.agency.Start(context.Background(), b, tcc.Immediate())
	require.NoError(f.T, err)
	servertest.Eventually(f.T, 30*time.Second, "trip "+id.String()+" to be "+string(want), func() bool {
		res, err := f.agency.Result(context.Background(), id)
		require.NoError(f.T, err)
		return res.Status == want
	})
	return id
}

// The REST API gives a TCC transaction's TccResult as the execution's result.
func TestTccResultThroughREST(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		f := setupTccConsole(t, drv)
		id := f.book(trip.Booking{Traveller: "Bob", Flight: "AT 1", Destination: "Atlantis"}, tcc.StatusCanceled)
		req, err := http.NewRequest(http.MethodGet, f.HTTP.URL+"/api/executions/"+id.String(), nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+viewerToken)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		var body struct {
			Status string         `json:"status"`
			Result *tcc.TccResult `json:"result"`
		}
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
		require.Equal(t, "COMPENSATED", body.Status)
		require.NotNil(t, body.Result)
		require.Equal(t, tcc.StatusCanceled, body.Result.Status)
		require.Equal(t, "hotel", body.Result.FailedParticipant)
		require.Equal(t, tcc.PhaseTry, body.Result.FailedPhase)
		require.Equal(t, "COMPLETED", body.Result.Participant("flight").Cancel.Status)
	})
}

// The execution page of a TCC transaction shows each participant's phases.
func TestTccPhasesInBrowser(t *testing.T) {
	t.Parallel()
	browser := startBrowser(t)
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		f := setupTccConsole(t, drv)
		cancelled := f.book(trip.Booking{Traveller: "Bob", Flight: "AT 1", Destination: "Atlantis"}, tcc.StatusCanceled)
		noCar := f.book(trip.Booking{Traveller: "Cy", Flight: "BA 117", Destination: "Boston", CarClass: "none"}, tcc.StatusConfirmed)

		tb := f.openTab(t, browser, viewerToken)
		tb.visit("/executions/" + cancelled.String())
		cell := func(participant, phase string) string {
			return `#participants-table tr[data-participant="` + participant + `"] td[data-phase="` + phase + `"]`
		}
		require.Equal(t, 3, tb.count("#participants-table tbody tr"), "one row per participant")
		require.Equal(t, 1, tb.count(cell("flight", "TRY")+`[data-status="COMPLETED"]`))
		require.Equal(t, 1, tb.count(cell("flight", "CONFIRM")+`[data-status=""]`), "the flight was never confirmed")
		require.Equal(t, 1, tb.count(cell("flight", "CANCEL")+`[data-status="COMPLETED"]`), "the seat was released")
		require.Contains(t, tb.text(cell("flight", "CANCEL")), "1 attempt")
		require.Equal(t, 1, tb.count(cell("hotel", "TRY")+`[data-status="FAILED"]`))
		require.Contains(t, tb.text(cell("hotel", "TRY")), "NO_ROOMS")
		require.Equal(t, 1, tb.count(cell("hotel", "CANCEL")+`[data-status=""]`), "a failed try is not cancelled")
		require.Equal(t, 1, tb.count(cell("car", "TRY")+`[data-status=""]`), "the car never tried")
		require.Contains(t, tb.text(`#participants-table tr[data-participant="car"] th`), "optional")
		require.Equal(t, 1, tb.count(`#timeline g.timeline-bar[data-step="flight"][data-status="COMPLETED"] rect`), "the timeline draws the flight's phases")
		require.Equal(t, 1, tb.count(`#timeline g.timeline-bar[data-step="hotel"][data-status="FAILED"] rect`))

		tb.visit("/executions/" + noCar.String())
		require.Equal(t, 1, tb.count(cell("car", "TRY")+`[data-status="FAILED"]`))
		require.Equal(t, 1, tb.count(cell("car", "CANCEL")+`[data-status=""]`), "an optional participant's failed try cancels nothing")
		for _, p := range []string{"flight", "hotel"} {
			require.Equal(t, 1, tb.count(cell(p, "CONFIRM")+`[data-status="COMPLETED"]`), p)
		}
		if drv.Name() == "sqlite" {
			t.Logf("a TCC's phases: %s", tb.screenshot("tcc-participants"))
		}

		tb.visit("/definitions/tcc/" + trip.Type)
		require.Equal(t, 3, tb.count("#dag g.dag-step"), "one box per participant, in try order")
		require.Equal(t, 1, tb.count(`#dag path.dag-edge[data-from="flight"][data-to="hotel"]`))
	})
}
