package scheduleweb

import (
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/schedule"
	"github.com/commandbus/commandbus/server"
)

type object = map[string]any

var durationNote = `a duration: Go ("90s", "1h30m"), ISO-8601 ("PT1M") or milliseconds ("60000"); not negative`

// schemas are the schedule schemas of the OpenAPI document.
func schemas() map[string]any {
	fields := map[string]map[string]any{
		"name":          {"description": "unique; letters, digits, '.', '_', ':' and '-'", "pattern": `^[A-Za-z0-9][A-Za-z0-9._:-]{0,199}$`},
		"model":         {"description": "the model of the definition to start (process, workflow, saga, tcc)"},
		"type":          {"description": "the execution type of the definition to start; it must be registered"},
		"cron":          {"description": "six fields: second minute hour day-of-month month day-of-week; give exactly one of cron, fixedRate, fixedDelay"},
		"zone":          {"description": "IANA time zone of cron (default UTC), such as America/New_York"},
		"fixedRate":     {"description": "start an execution every interval; " + durationNote},
		"fixedDelay":    {"description": "start an execution this long after the previous one ended; " + durationNote},
		"initialDelay":  {"description": "postpone the first tick; " + durationNote},
		"input":         {"description": "JSON input of every execution started; default {}"},
		"enabled":       {"description": "false creates the schedule paused; default true"},
		"misfirePolicy": {"description": "ticks missed while no replica ran: FIRE_ONCE (default) starts one execution, FIRE_ALL one per tick up to misfireLimit, SKIP none", "enum": []string{"FIRE_ONCE", "FIRE_ALL", "SKIP"}},
		"misfireLimit":  {"description": "most missed ticks FIRE_ALL starts; default 100", "minimum": 0},
	}
	return object{
		"ScheduleRequest":   server.Annotate(server.RequestSchemaOf[schedule.Request](), fields),
		"SchedulePatch":     server.Annotate(server.RequestSchemaOf[Patch](), withoutName(fields)),
		"Schedule":          server.SchemaOf[schedule.Schedule](),
		"ScheduleTriggered": server.SchemaOf[Triggered](),
		"JobLease":          server.SchemaOf[driver.JobLeaseRow](),
		"ScheduleAction":    server.Annotate(server.RequestSchemaOf[ActionRequest](), map[string]map[string]any{"reason": {"description": "why; recorded in the audit log with the token's subject", "maxLength": 2000}}),
	}
}

func withoutName(fields map[string]map[string]any) map[string]map[string]any {
	out := map[string]map[string]any{}
	for k, v := range fields {
		if k != "name" {
			out[k] = v
		}
	}
	return out
}

// operations are the schedule routes of the OpenAPI document.
func operations() []server.Operation {
	id := server.PathParam("id", "the schedule's id")
	notFound := server.ProblemResponse("No such schedule.")
	one := func(description string) object { return server.JSONResponse(description, server.Ref("Schedule")) }
	return []server.Operation{
		{ID: "listSchedules", Method: "get", Path: "/api/schedules", Summary: "List schedules with their next fire time and last result", Tag: "schedules",
			Params:    []map[string]any{server.LimitParam(server.DefaultListLimit, server.MaxListLimit), server.CursorParam()},
			Responses: object{"200": server.JSONResponse("A page of schedules, by name; next is the cursor of the following page.", server.PageSchema(server.Ref("Schedule")))}},
		{ID: "createSchedule", Method: "post", Path: "/api/schedules", Summary: "Create a schedule", Tag: "schedules", Operator: true, Body: "ScheduleRequest",
			Description: "Starts executions of a registered definition on a cron expression with seconds and a time zone, at a fixed rate, or with a fixed delay after the previous execution ended; each tick starts one execution across every replica. Bad input (an invalid cron, an unknown zone, a negative interval, an unknown definition) answers 400 naming the field and stores nothing.",
			Example: object{"name": "eod-review", "model": "workflow", "type": "ReviewFlow", "cron": "0 0 18 * * MON-FRI", "zone": "Europe/London",
				"input": object{"subject": "end-of-day"}, "description": "end-of-day review", "misfirePolicy": "FIRE_ONCE"},
			Responses: object{"201": one("The schedule."), "409": server.ProblemResponse("A schedule has this name.")}},
		{ID: "getSchedule", Method: "get", Path: "/api/schedules/{id}", Summary: "A schedule", Tag: "schedules", Params: []map[string]any{id},
			Responses: object{"200": one("The schedule."), "404": notFound}},
		{ID: "updateSchedule", Method: "patch", Path: "/api/schedules/{id}", Summary: "Change a schedule", Tag: "schedules", Operator: true, Body: "SchedulePatch",
			Description: "The fields given replace the schedule's; giving one of cron, fixedRate and fixedDelay replaces the trigger. A new trigger fires next from now.",
			Params:      []map[string]any{id}, Example: object{"cron": "0 30 18 * * MON-FRI", "description": "end-of-day review, after the cut-off"},
			Responses: object{"200": one("The schedule after the change."), "404": notFound}},
		{ID: "deleteSchedule", Method: "delete", Path: "/api/schedules/{id}", Summary: "Delete a schedule", Tag: "schedules", Operator: true,
			Description: "The executions it started are not touched.", Params: []map[string]any{id},
			Responses: object{"204": object{"description": "Deleted."}, "404": notFound}},
		{ID: "pauseSchedule", Body: "ScheduleAction", Example: object{"reason": "Downstream maintenance window."}, Method: "post", Path: "/api/schedules/{id}/pause", Summary: "Pause a schedule", Tag: "schedules", Operator: true,
			Params: []map[string]any{id}, Responses: object{"200": one("The paused schedule."), "404": notFound}},
		{ID: "resumeSchedule", Body: "ScheduleAction", Example: object{"reason": "Downstream maintenance window."}, Method: "post", Path: "/api/schedules/{id}/resume", Summary: "Resume a paused schedule", Tag: "schedules", Operator: true,
			Description: "Its ticks start again from now; those of the pause are not caught up.",
			Params:      []map[string]any{id}, Responses: object{"200": one("The resumed schedule."), "404": notFound}},
		{ID: "triggerSchedule", Body: "ScheduleAction", Example: object{"reason": "Downstream maintenance window."}, Method: "post", Path: "/api/schedules/{id}/trigger", Summary: "Start the schedule's execution now", Tag: "schedules", Operator: true,
			Description: "One execution with the schedule's input, paused or not; the schedule's own ticks do not move.",
			Params:      []map[string]any{id}, Responses: object{"200": server.JSONResponse("The execution started.", server.Ref("ScheduleTriggered")), "404": notFound}},
		{ID: "listJobLeases", Method: "get", Path: "/api/job-leases", Summary: "Periodic jobs that run once across replicas: holder and next run", Tag: "schedules",
			Description: "Not paged: one row per periodic job the binaries register (cleanups, the watchdog), answered whole.",
			Responses:   object{"200": server.JSONResponse("The jobs' leased rows, by name.", server.ItemsOf(server.Ref("JobLease")))}},
	}
}
