package schedule

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
)

// ErrNotFound is returned for a schedule that does not exist (it wraps driver.ErrNotFound).
var ErrNotFound = driver.ErrNotFound

// Schedule is a stored schedule as the API shows it: the row, its durations written out, and
// the status of the execution it started last (when asked for).
type Schedule struct {
	*driver.ScheduleRow
	// Interval is the fixed rate or fixed delay ("" for cron).
	Interval     string `json:"interval,omitempty"`
	InitialDelay string `json:"initialDelay,omitempty"`
	// LastStatus is the status of LastExecutionID ("" when unknown or not looked up).
	LastStatus string `json:"lastStatus,omitempty"`
}

func view(row *driver.ScheduleRow) *Schedule {
	v := &Schedule{ScheduleRow: row}
	if row.Interval > 0 {
		v.Interval = row.Interval.String()
	}
	if row.InitialDelay > 0 {
		v.InitialDelay = row.InitialDelay.String()
	}
	return v
}

// Create validates spec and stores it as a new schedule; bad input stores nothing and returns
// every problem, each a *commandbus.ValidationError naming its field. A name in use is
// driver.ErrConflict.
func (s *Scheduler) Create(ctx context.Context, spec Spec, op commandbus.OperatorAction) (*Schedule, error) {
	if err := checkActor(op); err != nil {
		return nil, err
	}
	def, trig, err := definition(s.rt, spec)
	if err != nil {
		return nil, err
	}
	now := s.cfg.Now()
	params := &driver.ScheduleInsertParams{ID: uuid.New(), Name: spec.Name, ScheduleDefinition: def, Enabled: !spec.Disabled,
		Source: driver.ScheduleFromAPI, Now: now}
	if params.Enabled {
		first := trig.first(now, def.InitialDelay)
		params.NextFireAt = &first
	}
	row, _, err := s.exec.ScheduleInsert(ctx, params)
	if err != nil {
		return nil, err
	}
	s.audit(ctx, row, "SCHEDULE_CREATED", op)
	s.signal()
	return view(row), nil
}

// Get returns a schedule by id with the status of its last execution.
func (s *Scheduler) Get(ctx context.Context, id uuid.UUID) (*Schedule, error) {
	row, err := s.exec.ScheduleGet(ctx, id)
	if err != nil {
		return nil, err
	}
	v := view(row)
	s.lastStatus(ctx, v)
	return v, nil
}

// GetByName returns a schedule by name.
func (s *Scheduler) GetByName(ctx context.Context, name string) (*Schedule, error) {
	row, err := s.exec.ScheduleGetByName(ctx, name)
	if err != nil {
		return nil, err
	}
	v := view(row)
	s.lastStatus(ctx, v)
	return v, nil
}

func (s *Scheduler) lastStatus(ctx context.Context, v *Schedule) {
	if v.LastExecutionID == nil {
		return
	}
	if x, err := s.exec.ExecutionGet(ctx, *v.LastExecutionID); err == nil {
		v.LastStatus = string(x.Status)
	}
}

// List returns the schedules ordered by name (at most limit; zero is 500), each with the status
// of its last execution.
func (s *Scheduler) List(ctx context.Context, limit int) ([]*Schedule, error) {
	return s.ListAfter(ctx, "", limit)
}

// ListAfter returns up to limit schedules by name, starting after the schedule named after (""
// for the first page): pass the last name of a page to read the next.
func (s *Scheduler) ListAfter(ctx context.Context, after string, limit int) ([]*Schedule, error) {
	rows, err := s.exec.ScheduleList(ctx, &driver.ScheduleListParams{AfterName: after, Limit: limit})
	if err != nil {
		return nil, err
	}
	out := make([]*Schedule, len(rows))
	for i, row := range rows {
		out[i] = view(row)
		s.lastStatus(ctx, out[i])
	}
	return out, nil
}

// Update replaces a schedule's definition with spec (its name cannot change). A changed trigger
// or a schedule enabled again fires next from now; otherwise the next fire time stays.
func (s *Scheduler) Update(ctx context.Context, id uuid.UUID, spec Spec, op commandbus.OperatorAction) (*Schedule, error) {
	if err := checkActor(op); err != nil {
		return nil, err
	}
	row, err := s.exec.ScheduleGet(ctx, id)
	if err != nil {
		return nil, err
	}
	if spec.Name != row.Name {
		return nil, &commandbus.ValidationError{Field: "name", Message: fmt.Sprintf("cannot be changed (it is %q); create a new schedule instead", row.Name)}
	}
	def, trig, err := definition(s.rt, spec)
	if err != nil {
		return nil, err
	}
	updated, err := s.rewrite(ctx, row, def, trig, !spec.Disabled)
	if err == nil {
		s.audit(ctx, updated.ScheduleRow, "SCHEDULE_UPDATED", op)
	}
	return updated, err
}

func (s *Scheduler) rewrite(ctx context.Context, row *driver.ScheduleRow, def driver.ScheduleDefinition, trig *trigger, enabled bool) (*Schedule, error) {
	now := s.cfg.Now()
	params := &driver.ScheduleUpdateParams{ID: row.ID, ScheduleDefinition: def, Enabled: enabled, Now: now,
		NextFireAt: row.NextFireAt}
	triggerChanged := def.Trigger != row.Trigger || def.Cron != row.Cron || def.Zone != row.Zone ||
		def.Interval != row.Interval || def.InitialDelay != row.InitialDelay
	switch {
	case !enabled:
		params.NextFireAt, params.ClearWaiting = nil, true
	case triggerChanged || !row.Enabled || (row.NextFireAt == nil && row.WaitingExecutionID == nil):
		first := trig.first(now, def.InitialDelay)
		params.NextFireAt, params.ClearWaiting = &first, true
	}
	updated, err := s.exec.ScheduleUpdate(ctx, params)
	if err != nil {
		return nil, err
	}
	s.signal()
	return view(updated), nil
}

// Pause disables a schedule: it fires nothing until Resume. Pausing a paused schedule changes
// nothing.
func (s *Scheduler) Pause(ctx context.Context, id uuid.UUID, op commandbus.OperatorAction) (*Schedule, error) {
	return s.setEnabled(ctx, id, false, op)
}

// Resume enables a paused schedule: its ticks start again from now (a fixed rate or delay fires
// at once); the ticks of the pause are not caught up. Resuming an enabled schedule changes
// nothing.
func (s *Scheduler) Resume(ctx context.Context, id uuid.UUID, op commandbus.OperatorAction) (*Schedule, error) {
	return s.setEnabled(ctx, id, true, op)
}

func (s *Scheduler) setEnabled(ctx context.Context, id uuid.UUID, enabled bool, op commandbus.OperatorAction) (*Schedule, error) {
	if err := checkActor(op); err != nil {
		return nil, err
	}
	row, err := s.exec.ScheduleGet(ctx, id)
	if err != nil {
		return nil, err
	}
	if row.Enabled == enabled {
		return view(row), nil
	}
	trig, err := triggerOf(row)
	if err != nil {
		return nil, err
	}
	updated, err := s.rewrite(ctx, row, definitionOf(row), trig, enabled)
	if err == nil {
		s.audit(ctx, updated.ScheduleRow, map[bool]string{true: "SCHEDULE_RESUMED", false: "SCHEDULE_PAUSED"}[enabled], op)
	}
	return updated, err
}

// Trigger starts one execution of the schedule now, whatever its trigger and whether it is
// paused, and returns its id. The schedule's own ticks are not moved.
func (s *Scheduler) Trigger(ctx context.Context, id uuid.UUID, op commandbus.OperatorAction) (uuid.UUID, error) {
	if err := checkActor(op); err != nil {
		return uuid.Nil, err
	}
	row, err := s.exec.ScheduleGet(ctx, id)
	if err != nil {
		return uuid.Nil, err
	}
	now := s.cfg.Now()
	execID := uuid.NewSHA1(row.ID, []byte("manual:"+now.UTC().Format(time.RFC3339Nano)))
	if err := s.start(ctx, row, execID); err != nil {
		return uuid.Nil, err
	}
	s.audit(ctx, row, "SCHEDULE_TRIGGERED", op, "execution_id", execID)
	return execID, nil
}

// Delete removes a schedule; executions it started are not touched.
func (s *Scheduler) Delete(ctx context.Context, id uuid.UUID, op commandbus.OperatorAction) error {
	if err := checkActor(op); err != nil {
		return err
	}
	row, err := s.exec.ScheduleGet(ctx, id)
	if err != nil {
		return err
	}
	if err := s.exec.ScheduleDelete(ctx, id); err != nil {
		return err
	}
	s.audit(ctx, row, "SCHEDULE_DELETED", op)
	return nil
}

// AuditEntity is the entity type of the audit log entries of schedules.
const AuditEntity = "schedule"

// checkActor requires the actor every change of a schedule is audited with; the reason is
// optional.
func checkActor(op commandbus.OperatorAction) error {
	if strings.TrimSpace(op.Actor) == "" {
		return &commandbus.ValidationError{Field: "actor", Message: "required: every change of a schedule is audited with who made it"}
	}
	return nil
}

// audit records a change of a schedule in the audit log (entity "schedule", its id) and the log.
func (s *Scheduler) audit(ctx context.Context, row *driver.ScheduleRow, action string, op commandbus.OperatorAction, extra ...any) {
	details, _ := json.Marshal(map[string]any{"name": row.Name, "enabled": row.Enabled, "nextFireAt": row.NextFireAt})
	now := s.cfg.Now()
	if err := s.exec.AuditLogInsert(context.WithoutCancel(ctx), &driver.AuditLogInsertParams{EntityType: AuditEntity, EntityID: row.ID.String(),
		Action: action, Actor: op.Actor, Reason: op.Reason, Details: details, Now: &now}); err != nil {
		s.logger.Error("writing the audit log failed", "schedule", row.Name, "schedule_id", row.ID, "action", action, "error", err)
	}
	args := append([]any{"schedule", row.Name, "schedule_id", row.ID, "action", action, "actor", op.Actor, "reason", op.Reason,
		"enabled", row.Enabled, "next_fire_at", row.NextFireAt}, extra...)
	s.logger.Info("schedule changed", args...)
}

// JobLeases returns the leased rows of the periodic jobs that run once per tick across
// replicas, with their holder and next run.
func (s *Scheduler) JobLeases(ctx context.Context) ([]*driver.JobLeaseRow, error) {
	return s.exec.JobLeaseList(ctx)
}

// declaredBy is who creates and updates declared schedules.
var declaredBy = commandbus.OperatorAction{Actor: "scheduler", Reason: "declared with the definition"}

// SyncDeclared creates the schedules declared on the runtime that do not exist and rewrites
// those whose declaration changed (an operator's pause stays). Start calls it; so may a
// deployment step.
func (s *Scheduler) SyncDeclared(ctx context.Context) error {
	var errs []error
	for _, spec := range s.rt.DeclaredSchedules() {
		def, trig, err := definition(s.rt, spec)
		if err != nil {
			errs = append(errs, fmt.Errorf("declared schedule %q: %w", spec.Name, err))
			continue
		}
		now := s.cfg.Now()
		params := &driver.ScheduleInsertParams{ID: uuid.New(), Name: spec.Name, ScheduleDefinition: def, Enabled: !spec.Disabled,
			Source: driver.ScheduleDeclared, IfAbsent: true, Now: now}
		if params.Enabled {
			first := trig.first(now, def.InitialDelay)
			params.NextFireAt = &first
		}
		row, inserted, err := s.exec.ScheduleInsert(ctx, params)
		if err != nil {
			errs = append(errs, fmt.Errorf("declared schedule %q: %w", spec.Name, err))
			continue
		}
		if inserted {
			s.audit(ctx, row, "SCHEDULE_CREATED", declaredBy)
		}
		if inserted || row.SpecHash == def.SpecHash {
			continue
		}
		updated, err := s.rewrite(ctx, row, def, trig, row.Enabled)
		if err != nil {
			errs = append(errs, fmt.Errorf("declared schedule %q: %w", spec.Name, err))
			continue
		}
		s.audit(ctx, updated.ScheduleRow, "SCHEDULE_UPDATED", declaredBy)
	}
	return errors.Join(errs...)
}

// SpecOf returns the definition of a stored schedule, as Update takes it.
func SpecOf(row *driver.ScheduleRow) Spec {
	spec := Spec{Name: row.Name, Model: row.Model, Type: row.Type, Cron: row.Cron, Zone: row.Zone,
		InitialDelay: row.InitialDelay, Input: row.Input, Disabled: !row.Enabled, Description: row.Description,
		Misfire: row.Misfire, MisfireLimit: row.MisfireLimit}
	switch row.Trigger {
	case driver.TriggerFixedRate:
		spec.FixedRate = row.Interval
	case driver.TriggerFixedDelay:
		spec.FixedDelay = row.Interval
	}
	return spec
}

func definitionOf(row *driver.ScheduleRow) driver.ScheduleDefinition {
	return driver.ScheduleDefinition{Model: row.Model, Type: row.Type, Trigger: row.Trigger, Cron: row.Cron, Zone: row.Zone,
		Interval: row.Interval, InitialDelay: row.InitialDelay, Input: row.Input, Description: row.Description,
		Misfire: row.Misfire, MisfireLimit: row.MisfireLimit, SpecHash: row.SpecHash}
}
