// Package scheduleweb puts durable schedules (package schedule) on the server: the REST routes
// /api/schedules and /api/job-leases with their OpenAPI operations, and the console's schedules
// page. Add it to server.Config.Extensions:
//
//	scheduler, _ := schedule.New(rt, schedule.Config{})
//	srv, _ := server.New(server.Config{Client: client, Runtime: rt, Extensions: []server.Extension{scheduleweb.New(scheduler)}})
package scheduleweb

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/google/uuid"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/schedule"
	"github.com/commandbus/commandbus/server"
)

// Extension is the schedules' face on the server.
type Extension struct {
	server.ExtensionBase
	scheduler *schedule.Scheduler
	m         *server.Mount
}

// New returns the extension over scheduler.
func New(scheduler *schedule.Scheduler) *Extension { return &Extension{scheduler: scheduler} }

// Mount registers the REST routes, their OpenAPI operations and the console page.
func (e *Extension) Mount(m *server.Mount) error {
	if e.scheduler == nil {
		return errors.New("scheduleweb: New needs a scheduler")
	}
	if e.scheduler.Runtime().Client() != m.Client() {
		return errors.New("scheduleweb: the scheduler belongs to another client")
	}
	e.m = m
	m.HandleAPI("GET /api/schedules", server.RoleViewer, e.list)
	m.HandleAPI("POST /api/schedules", server.RoleOperator, e.create)
	m.HandleAPI("GET /api/schedules/{id}", server.RoleViewer, e.get)
	m.HandleAPI("PATCH /api/schedules/{id}", server.RoleOperator, e.patch)
	m.HandleAPI("DELETE /api/schedules/{id}", server.RoleOperator, e.remove)
	m.HandleAPI("POST /api/schedules/{id}/pause", server.RoleOperator, e.pause)
	m.HandleAPI("POST /api/schedules/{id}/resume", server.RoleOperator, e.resume)
	m.HandleAPI("POST /api/schedules/{id}/trigger", server.RoleOperator, e.trigger)
	m.HandleAPI("GET /api/job-leases", server.RoleViewer, e.jobLeases)
	m.Document(operations(), schemas())
	return e.mountConsole(m)
}

func (e *Extension) list(w http.ResponseWriter, r *http.Request) {
	q := server.ParseQuery(r, "limit", "cursor")
	limit := q.Limit(server.DefaultListLimit, server.MaxListLimit)
	after := q.Cursor()
	if err := q.Err(); err != nil {
		e.m.WriteError(w, r, err)
		return
	}
	list, err := e.scheduler.ListAfter(r.Context(), after, limit+1) // one more tells whether there is a next page
	if err != nil {
		e.m.WriteError(w, r, err)
		return
	}
	server.WriteJSON(w, http.StatusOK, server.PageOf(list, limit, func(s *schedule.Schedule) string { return s.Name }))
}

func (e *Extension) create(w http.ResponseWriter, r *http.Request) {
	var req schedule.Request
	if err := server.DecodeBody(w, r, &req); err != nil {
		e.m.WriteError(w, r, err)
		return
	}
	spec, err := req.Spec()
	if err != nil {
		e.m.WriteError(w, r, err)
		return
	}
	created, err := e.scheduler.Create(r.Context(), spec, commandbus.OperatorAction{Actor: server.Subject(r)})
	if err != nil {
		e.m.WriteError(w, r, err)
		return
	}
	server.WriteJSON(w, http.StatusCreated, created)
}

func (e *Extension) get(w http.ResponseWriter, r *http.Request) {
	id, err := server.PathID(r)
	if err != nil {
		e.m.WriteError(w, r, err)
		return
	}
	s, err := e.scheduler.Get(r.Context(), id)
	if err != nil {
		e.m.WriteError(w, r, err)
		return
	}
	server.WriteJSON(w, http.StatusOK, s)
}

// Patch is a PATCH body: the fields given replace the schedule's; giving one of cron,
// fixedRate and fixedDelay replaces the trigger (the others are cleared).
type Patch struct {
	Model         *string         `json:"model,omitempty"`
	Type          *string         `json:"type,omitempty"`
	Cron          *string         `json:"cron,omitempty"`
	Zone          *string         `json:"zone,omitempty"`
	FixedRate     *string         `json:"fixedRate,omitempty"`
	FixedDelay    *string         `json:"fixedDelay,omitempty"`
	InitialDelay  *string         `json:"initialDelay,omitempty"`
	Input         json.RawMessage `json:"input,omitempty"`
	Enabled       *bool           `json:"enabled,omitempty"`
	Description   *string         `json:"description,omitempty"`
	MisfirePolicy *string         `json:"misfirePolicy,omitempty"`
	MisfireLimit  *int            `json:"misfireLimit,omitempty"`
}

func (p *Patch) apply(req *schedule.Request) {
	if p.Cron != nil || p.FixedRate != nil || p.FixedDelay != nil {
		req.Cron, req.FixedRate, req.FixedDelay = "", "", ""
	}
	set := func(dst *string, v *string) {
		if v != nil {
			*dst = *v
		}
	}
	set(&req.Model, p.Model)
	set(&req.Type, p.Type)
	set(&req.Cron, p.Cron)
	set(&req.Zone, p.Zone)
	set(&req.FixedRate, p.FixedRate)
	set(&req.FixedDelay, p.FixedDelay)
	set(&req.InitialDelay, p.InitialDelay)
	set(&req.Description, p.Description)
	set(&req.MisfirePolicy, p.MisfirePolicy)
	if p.Input != nil {
		req.Input = p.Input
	}
	if p.Enabled != nil {
		req.Enabled = p.Enabled
	}
	if p.MisfireLimit != nil {
		req.MisfireLimit = *p.MisfireLimit
	}
}

func (e *Extension) patch(w http.ResponseWriter, r *http.Request) {
	id, err := server.PathID(r)
	if err != nil {
		e.m.WriteError(w, r, err)
		return
	}
	var p Patch
	if err := server.DecodeBody(w, r, &p); err != nil {
		e.m.WriteError(w, r, err)
		return
	}
	current, err := e.scheduler.Get(r.Context(), id)
	if err != nil {
		e.m.WriteError(w, r, err)
		return
	}
	req := schedule.RequestOf(current.ScheduleRow)
	p.apply(&req)
	spec, err := req.Spec()
	if err != nil {
		e.m.WriteError(w, r, err)
		return
	}
	updated, err := e.scheduler.Update(r.Context(), id, spec, commandbus.OperatorAction{Actor: server.Subject(r)})
	if err != nil {
		e.m.WriteError(w, r, err)
		return
	}
	server.WriteJSON(w, http.StatusOK, updated)
}

func (e *Extension) remove(w http.ResponseWriter, r *http.Request) {
	id, err := server.PathID(r)
	if err != nil {
		e.m.WriteError(w, r, err)
		return
	}
	if err := e.scheduler.Delete(r.Context(), id, commandbus.OperatorAction{Actor: server.Subject(r)}); err != nil {
		e.m.WriteError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (e *Extension) pause(w http.ResponseWriter, r *http.Request) {
	e.setEnabled(w, r, e.scheduler.Pause)
}

func (e *Extension) resume(w http.ResponseWriter, r *http.Request) {
	e.setEnabled(w, r, e.scheduler.Resume)
}

// ActionRequest is the optional body of pause, resume and trigger: why, for the audit log.
type ActionRequest struct {
	Reason string `json:"reason,omitempty"`
}

// operatorAction reads the optional body of an action: the token's subject acts, for the reason
// given.
func (e *Extension) operatorAction(w http.ResponseWriter, r *http.Request) (uuid.UUID, commandbus.OperatorAction, error) {
	id, err := server.PathID(r)
	if err != nil {
		return uuid.Nil, commandbus.OperatorAction{}, err
	}
	var body ActionRequest
	if err := server.DecodeBody(w, r, &body); err != nil {
		return uuid.Nil, commandbus.OperatorAction{}, err
	}
	return id, commandbus.OperatorAction{Actor: server.Subject(r), Reason: body.Reason}, nil
}

func (e *Extension) setEnabled(w http.ResponseWriter, r *http.Request, act func(ctx context.Context, id uuid.UUID, op commandbus.OperatorAction) (*schedule.Schedule, error)) {
	id, op, err := e.operatorAction(w, r)
	if err != nil {
		e.m.WriteError(w, r, err)
		return
	}
	s, err := act(r.Context(), id, op)
	if err != nil {
		e.m.WriteError(w, r, err)
		return
	}
	server.WriteJSON(w, http.StatusOK, s)
}

// Triggered answers a trigger: the execution started and the schedule.
type Triggered struct {
	ExecutionID uuid.UUID          `json:"executionId"`
	Schedule    *schedule.Schedule `json:"schedule"`
}

func (e *Extension) trigger(w http.ResponseWriter, r *http.Request) {
	id, op, err := e.operatorAction(w, r)
	if err != nil {
		e.m.WriteError(w, r, err)
		return
	}
	execID, err := e.scheduler.Trigger(r.Context(), id, op)
	if err != nil {
		e.m.WriteError(w, r, err)
		return
	}
	s, err := e.scheduler.Get(r.Context(), id)
	if err != nil {
		e.m.WriteError(w, r, err)
		return
	}
	server.WriteJSON(w, http.StatusOK, Triggered{ExecutionID: execID, Schedule: s})
}

func (e *Extension) jobLeases(w http.ResponseWriter, r *http.Request) {
	if err := server.ParseQuery(r).Err(); err != nil {
		e.m.WriteError(w, r, err)
		return
	}
	rows, err := e.scheduler.JobLeases(r.Context())
	if err != nil {
		e.m.WriteError(w, r, err)
		return
	}
	server.WriteJSON(w, http.StatusOK, server.Items(rows))
}
