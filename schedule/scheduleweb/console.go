package scheduleweb

import (
	"context"
	"embed"
	"net/http"
	"net/url"

	"github.com/google/uuid"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/schedule"
	"github.com/commandbus/commandbus/server"
)

//go:embed templates/*.html
var templates embed.FS

// mountConsole registers the console's schedules page, its actions and its navigation entry.
func (e *Extension) mountConsole(m *server.Mount) error {
	if err := m.Templates(templates, "templates/*.html"); err != nil {
		return err
	}
	m.HandlePage("GET /schedules", server.RoleViewer, e.schedulesPage)
	m.HandlePage("GET /schedules/{id}/{action}", server.RoleOperator, e.scheduleAction)
	m.HandlePage("POST /schedules/{id}/{action}", server.RoleOperator, e.scheduleAction)
	m.Nav(server.NavEntry{Key: "schedules", Label: "Schedules", Href: "/schedules", AfterQueues: true})
	return nil
}

type schedulesData struct {
	Items []*scheduleRow
	// Jobs are the periodic jobs that run once per interval across replicas (their leased rows).
	Jobs []*driver.JobLeaseRow
}

type scheduleRow struct {
	*schedule.Schedule
	Trigger string
}

// describe words a schedule's trigger for the page.
func describe(s *schedule.Schedule) string {
	switch s.ScheduleRow.Trigger {
	case "CRON":
		zone := s.Zone
		if zone == "" {
			zone = "UTC"
		}
		return "cron " + s.Cron + " (" + zone + ")"
	case "FIXED_RATE":
		return "every " + s.Interval
	default:
		return s.Interval + " after the last ended"
	}
}

func (e *Extension) schedulesPage(w http.ResponseWriter, r *http.Request) {
	list, err := e.scheduler.List(r.Context(), 1000)
	if err != nil {
		e.m.Failed(w, r, err)
		return
	}
	d := schedulesData{Items: make([]*scheduleRow, 0, len(list))}
	for _, s := range list {
		d.Items = append(d.Items, &scheduleRow{Schedule: s, Trigger: describe(s)})
	}
	if d.Jobs, err = e.scheduler.JobLeases(r.Context()); err != nil {
		e.m.Failed(w, r, err)
		return
	}
	p := e.m.NewPage(w, r, "Schedules", "schedules")
	p.Data = d
	e.m.Render(w, r, http.StatusOK, "schedules.html", p)
}

func (e *Extension) scheduleAction(w http.ResponseWriter, r *http.Request) {
	id, err := uuid.Parse(r.PathValue("id"))
	if err != nil {
		e.m.ErrorPage(w, r, http.StatusNotFound, "Not found", "That is not a schedule id.")
		return
	}
	s, err := e.scheduler.Get(r.Context(), id)
	if err != nil {
		e.m.Failed(w, r, err)
		return
	}
	spec := &server.ActionPage{Nav: "schedules", Return: e.m.ReturnTo(r, "/schedules"), Facts: []server.Fact{
		{Label: "Schedule", Value: s.Name},
		{Label: "Starts", Value: s.Model + " " + s.Type},
		{Label: "Trigger", Value: describe(s)},
	}}
	switch r.PathValue("action") {
	case "pause":
		spec.Title, spec.Submit = "Pause schedule "+s.Name, "Pause"
		spec.Description = "The schedule starts nothing until it is resumed; executions it started run on."
		spec.Done = "Schedule " + s.Name + " paused."
		if !s.Enabled {
			spec.Unavailable = "This schedule is paused already."
		}
		spec.Run = func(ctx context.Context, op commandbus.OperatorAction, _ url.Values) error {
			_, err := e.scheduler.Pause(ctx, id, op)
			return err
		}
	case "resume":
		spec.Title, spec.Submit = "Resume schedule "+s.Name, "Resume"
		spec.Description = "The schedule fires again from now; the ticks of the pause are not caught up."
		spec.Done = "Schedule " + s.Name + " resumed."
		if s.Enabled {
			spec.Unavailable = "This schedule is running already."
		}
		spec.Run = func(ctx context.Context, op commandbus.OperatorAction, _ url.Values) error {
			_, err := e.scheduler.Resume(ctx, id, op)
			return err
		}
	case "trigger":
		spec.Title, spec.Submit = "Trigger schedule "+s.Name+" now", "Trigger"
		spec.Description = "One execution of " + s.Model + " " + s.Type + " starts now with the schedule's input; the schedule's own ticks do not move."
		spec.Done = "Schedule " + s.Name + " triggered."
		spec.Run = func(ctx context.Context, op commandbus.OperatorAction, _ url.Values) error {
			_, err := e.scheduler.Trigger(ctx, id, op)
			return err
		}
	default:
		e.m.ErrorPage(w, r, http.StatusNotFound, "Not found", "A schedule can be paused, resumed or triggered.")
		return
	}
	e.m.Act(w, r, spec)
}
