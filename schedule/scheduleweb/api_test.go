package scheduleweb_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/clock"
	"github.com/commandbus/commandbus/internal/dbtest"
	"github.com/commandbus/commandbus/internal/servertest"
	"github.com/commandbus/commandbus/orchestration"
	"github.com/commandbus/commandbus/process"
	"github.com/commandbus/commandbus/schedule"
	"github.com/commandbus/commandbus/schedule/scheduleweb"
	"github.com/commandbus/commandbus/server"
)

const (
	operatorToken = "operator-token-0123456789"
	viewerToken   = "viewer-token-0123456789ab"
)

type report struct {
	Days int `json:"days"`
}

type reportProcess struct{}

func (reportProcess) Type() string   { return "report" }
func (reportProcess) Domain() string { return "reports" }
func (reportProcess) Execute(x *process.Execution[report]) error {
	_, err := process.Step(x, "build", func(ctx context.Context) (int, error) { return x.State.Days, nil })
	return err
}

type fixture struct {
	url   string
	exec  driver.Executor
	api   *servertest.Documented
	clock *clock.Fake
}

func setup(t *testing.T, drv driver.Driver) *fixture {
	t.Helper()
	fake := clock.NewFake(time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC))
	off := false
	cfg := &commandbus.Config{Logger: slog.New(slog.DiscardHandler), Clock: fake}
	cfg.Features.ProcessExecution = &off
	client, err := commandbus.NewClient(drv, cfg)
	require.NoError(t, err)
	rt, err := orchestration.New(client, orchestration.Config{})
	require.NoError(t, err)
	_, err = process.NewManager(rt, process.Process[report](reportProcess{}))
	require.NoError(t, err)
	scheduler, err := schedule.New(rt, schedule.Config{Passive: true})
	require.NoError(t, err)
	srv, err := server.New(server.Config{Client: client, Runtime: rt, Extensions: []server.Extension{scheduleweb.New(scheduler)},
		Tokens: []server.Token{{Subject: "alice@ops", Token: operatorToken, Role: server.RoleOperator},
			{Subject: "victor@audit", Token: viewerToken, Role: server.RoleViewer}}})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, srv.Close()) })
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)

	return &fixture{url: hs.URL, exec: drv.Executor(), api: servertest.NewDocumented(t, hs.URL), clock: fake}
}

// call sends a request and checks both it and the answer against the OpenAPI document.
func (f *fixture) call(t *testing.T, method, path string, body any, token string) (int, []byte) {
	t.Helper()
	return f.api.Call(t, method, path, body, token)
}

func decode[T any](t *testing.T, data []byte) T {
	t.Helper()
	var v T
	require.NoError(t, json.Unmarshal(data, &v), string(data))
	return v
}

type scheduleJSON struct {
	ID              string  `json:"id"`
	Name            string  `json:"name"`
	Trigger         string  `json:"trigger"`
	Cron            string  `json:"cron"`
	Interval        string  `json:"interval"`
	Enabled         bool    `json:"enabled"`
	NextFireAt      *string `json:"nextFireAt"`
	Description     string  `json:"description"`
	LastExecutionID *string `json:"lastExecutionId"`
}

func TestSchedulesAPI(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		f := setup(t, drv)
		status, body := f.call(t, "POST", "/api/schedules", map[string]any{"name": "eod", "model": "process", "type": "report",
			"cron": "0 0 18 * * MON-FRI", "zone": "Europe/London", "input": map[string]any{"days": 1}}, operatorToken)
		require.Equal(t, http.StatusCreated, status, string(body))
		created := decode[scheduleJSON](t, body)
		require.Equal(t, "CRON", created.Trigger)
		require.Equal(t, "2026-05-01T17:00:00Z", *created.NextFireAt, "18:00 in London is 17:00 UTC in May")

		status, body = f.call(t, "POST", "/api/schedules", map[string]any{"name": "eod", "model": "process", "type": "report", "fixedRate": "1m"}, operatorToken)
		require.Equal(t, http.StatusConflict, status, string(body))
		status, _ = f.call(t, "POST", "/api/schedules", map[string]any{"name": "x", "model": "process", "type": "report", "fixedRate": "1m"}, viewerToken)
		require.Equal(t, http.StatusForbidden, status, "a viewer cannot create")

		status, body = f.call(t, "GET", "/api/schedules", nil, viewerToken)
		require.Equal(t, http.StatusOK, status)
		require.Len(t, decode[struct{ Items []scheduleJSON }](t, body).Items, 1)
		status, body = f.call(t, "GET", "/api/schedules/"+created.ID, nil, viewerToken)
		require.Equal(t, http.StatusOK, status)
		require.Equal(t, "eod", decode[scheduleJSON](t, body).Name)

		status, body = f.call(t, "PATCH", "/api/schedules/"+created.ID, map[string]any{"fixedRate": "90s", "description": "every 90s"}, operatorToken)
		require.Equal(t, http.StatusOK, status, string(body))
		patched := decode[scheduleJSON](t, body)
		require.Equal(t, "FIXED_RATE", patched.Trigger, "a new trigger replaces the cron")
		require.Equal(t, "1m30s", patched.Interval)
		require.Equal(t, "every 90s", patched.Description)
		status, body = f.call(t, "PATCH", "/api/schedules/"+created.ID, map[string]any{"fixedRate": "-5s"}, operatorToken)
		require.Equal(t, http.StatusBadRequest, status, string(body))

		status, body = f.call(t, "POST", "/api/schedules/"+created.ID+"/pause", map[string]any{"reason": "maintenance window"}, operatorToken)
		require.Equal(t, http.StatusOK, status, string(body))
		require.False(t, decode[scheduleJSON](t, body).Enabled)
		audit, err := f.exec.AuditLogList(context.Background(), &driver.AuditLogListParams{EntityType: schedule.AuditEntity, EntityID: created.ID})
		require.NoError(t, err)
		require.Equal(t, "SCHEDULE_PAUSED", audit[0].Action, "newest first")
		require.Equal(t, "alice@ops", audit[0].Actor, "the token's subject")
		require.Equal(t, "maintenance window", audit[0].Reason)
		status, body = f.call(t, "POST", "/api/schedules/"+created.ID+"/trigger", nil, operatorToken)
		require.Equal(t, http.StatusOK, status, string(body))
		triggered := decode[struct {
			ExecutionID string `json:"executionId"`
		}](t, body)
		rows, err := f.exec.ExecutionList(context.Background(), &driver.ExecutionListParams{BusinessKey: "eod"})
		require.NoError(t, err)
		require.Len(t, rows, 1)
		require.Equal(t, triggered.ExecutionID, rows[0].ID.String())
		require.JSONEq(t, `{"days":1}`, string(rows[0].State))
		status, body = f.call(t, "POST", "/api/schedules/"+created.ID+"/resume", nil, operatorToken)
		require.Equal(t, http.StatusOK, status, string(body))
		require.True(t, decode[scheduleJSON](t, body).Enabled)

		status, body = f.call(t, "GET", "/api/job-leases", nil, viewerToken)
		require.Equal(t, http.StatusOK, status, string(body))

		status, _ = f.call(t, "DELETE", "/api/schedules/"+created.ID, nil, operatorToken)
		require.Equal(t, http.StatusNoContent, status)
		status, body = f.call(t, "GET", "/api/schedules/"+created.ID, nil, viewerToken)
		require.Equal(t, http.StatusNotFound, status, string(body))
	})
}

func TestSchedulesAPIRefusesBadInput(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		f := setup(t, drv)
		good := func() map[string]any {
			return map[string]any{"name": "nightly", "model": "process", "type": "report", "cron": "0 0 2 * * *"}
		}
		for _, c := range []struct {
			name  string
			edit  func(m map[string]any)
			field string
		}{
			{"InvalidCron", func(m map[string]any) { m["cron"] = "0 0 2 * *" }, "cron"},
			{"UnknownZone", func(m map[string]any) { m["zone"] = "Europe/Atlantis" }, "zone"},
			{"NegativeInterval", func(m map[string]any) { delete(m, "cron"); m["fixedDelay"] = "-30s" }, "fixedDelay"},
			{"UnparsableInterval", func(m map[string]any) { delete(m, "cron"); m["fixedRate"] = "often" }, "fixedRate"},
			{"UnknownDefinition", func(m map[string]any) { m["type"] = "no-such-type" }, "type"},
			{"BadMisfirePolicy", func(m map[string]any) { m["misfirePolicy"] = "LATER" }, "misfirePolicy"},
			{"UnknownField", func(m map[string]any) { m["every"] = "day" }, "every"},
		} {
			body := good()
			c.edit(body)
			status, data := f.call(t, "POST", "/api/schedules", body, operatorToken)
			require.Equal(t, http.StatusBadRequest, status, "%s: %s", c.name, data)
			p := decode[server.Problem](t, data)
			var fields []string
			for _, e := range p.Errors {
				fields = append(fields, e.Field)
			}
			if len(fields) == 0 {
				require.Contains(t, p.Detail+p.Title, c.field, c.name)
			} else {
				require.Contains(t, fields, c.field, "%s: %s", c.name, data)
			}
		}
		status, data := f.call(t, "GET", "/api/schedules", nil, viewerToken)
		require.Equal(t, http.StatusOK, status)
		require.Empty(t, decode[struct{ Items []scheduleJSON }](t, data).Items, "bad input stores nothing")
	})
}

// The schedules list pages by name with an opaque cursor: every schedule once, hasMore until
// the last page; a cursor the server did not make is a 400 naming it.
func TestSchedulesAPIPages(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		f := setup(t, drv)
		names := []string{"a-first", "b-second", "c-third", "d-fourth", "e-fifth"}
		for _, name := range names {
			status, body := f.call(t, "POST", "/api/schedules", map[string]any{"name": name, "model": "process", "type": "report", "fixedRate": "1h"}, operatorToken)
			require.Equal(t, http.StatusCreated, status, string(body))
		}
		type page struct {
			Items   []scheduleJSON `json:"items"`
			Next    string         `json:"next"`
			HasMore bool           `json:"hasMore"`
		}
		var got []string
		path := "/api/schedules?limit=2"
		for pages := 0; ; pages++ {
			require.Less(t, pages, 3, "five schedules take three pages of two")
			status, body := f.call(t, "GET", path, nil, viewerToken)
			require.Equal(t, http.StatusOK, status, string(body))
			p := decode[page](t, body)
			for _, s := range p.Items {
				got = append(got, s.Name)
			}
			if !p.HasMore {
				require.Empty(t, p.Next, "no cursor on the last page")
				break
			}
			require.NotEmpty(t, p.Next)
			path = "/api/schedules?limit=2&cursor=" + p.Next
		}
		require.Equal(t, names, got, "every schedule once, by name")

		status, body := f.call(t, "GET", "/api/schedules?cursor=not-ours", nil, viewerToken)
		require.Equal(t, http.StatusBadRequest, status, string(body))
		require.Contains(t, string(body), "cursor")
	})
}
