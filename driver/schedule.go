package driver

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/google/uuid"

	"github.com/commandbus/commandbus/cbtype"
)

// The stable schedule types live in package cbtype; these aliases keep the driver's names.
type (
	// TriggerKind is cbtype.TriggerKind.
	TriggerKind = cbtype.TriggerKind
	// MisfirePolicy is cbtype.MisfirePolicy.
	MisfirePolicy = cbtype.MisfirePolicy
	// ScheduleSource is cbtype.ScheduleSource.
	ScheduleSource = cbtype.ScheduleSource
	// ScheduleRow is cbtype.ScheduleRow.
	ScheduleRow = cbtype.ScheduleRow
	// JobLeaseRow is cbtype.JobLeaseRow.
	JobLeaseRow = cbtype.JobLeaseRow
)

// ScheduleExecutor holds the queries of durable schedules.
type ScheduleExecutor interface {
	// ScheduleInsert stores a new schedule. A name that exists is ErrConflict, unless IfAbsent,
	// in which case nothing is written and the stored row is returned with inserted=false.
	ScheduleInsert(ctx context.Context, params *ScheduleInsertParams) (row *ScheduleRow, inserted bool, err error)
	// ScheduleGet returns a schedule by id, or ErrNotFound.
	ScheduleGet(ctx context.Context, id uuid.UUID) (*ScheduleRow, error)
	// ScheduleGetByName returns a schedule by name, or ErrNotFound.
	ScheduleGetByName(ctx context.Context, name string) (*ScheduleRow, error)
	// ScheduleList returns schedules ordered by name.
	ScheduleList(ctx context.Context, params *ScheduleListParams) ([]*ScheduleRow, error)
	// ScheduleUpdate rewrites a schedule's definition, enabled flag and next fire time, clears
	// its wait on a fixed-delay execution when asked, and moves its fence on, so a replica that
	// claimed it before cannot write over the change. ErrNotFound when it does not exist.
	ScheduleUpdate(ctx context.Context, params *ScheduleUpdateParams) (*ScheduleRow, error)
	// ScheduleDelete removes a schedule; ErrNotFound when it does not exist.
	ScheduleDelete(ctx context.Context, id uuid.UUID) error
	// ScheduleClaimDue claims enabled schedules whose next fire time is at or before Now and that
	// no live lease holds, earliest first, skipping rows another transaction locks: each gets a
	// lease until Now+Lease for Holder and a new fence.
	ScheduleClaimDue(ctx context.Context, params *ScheduleClaimDueParams) ([]*ScheduleRow, error)
	// ScheduleFiredMany records what the claims did (next fire time, last tick and execution,
	// fires counted) and releases their leases; a row whose fence moved on (an operator changed
	// it, or another replica took it over) is left alone. It returns how many rows it wrote.
	ScheduleFiredMany(ctx context.Context, params *ScheduleFiredManyParams) (int, error)
	// ScheduleRearm gives fixed-delay schedules whose waited-on execution has ended (or no
	// longer exists) their next fire time: the end plus the interval (Now plus the interval when
	// the execution is gone). It returns how many it re-armed.
	ScheduleRearm(ctx context.Context, params *ScheduleRearmParams) (int, error)
	// ScheduleNextDue returns the earliest next fire time of an enabled schedule, or nil.
	ScheduleNextDue(ctx context.Context) (*time.Time, error)
}

// ScheduleDefinition is what a schedule is: its target, trigger, input and misfire policy.
type ScheduleDefinition struct {
	Model        string
	Type         string
	Trigger      TriggerKind
	Cron         string
	Zone         string
	Interval     time.Duration
	InitialDelay time.Duration
	// Input is JSON; empty stores {}.
	Input        json.RawMessage
	Description  string
	Misfire      MisfirePolicy
	MisfireLimit int
	SpecHash     string
}

// ScheduleInsertParams stores a new schedule.
type ScheduleInsertParams struct {
	ID   uuid.UUID
	Name string
	ScheduleDefinition
	Enabled    bool
	Source     ScheduleSource
	NextFireAt *time.Time
	// IfAbsent makes an existing name a no-op instead of ErrConflict.
	IfAbsent bool
	Now      time.Time
}

// Validate checks what the database cannot.
func (p *ScheduleInsertParams) Validate() error {
	if p.ID == uuid.Nil || p.Name == "" || p.Model == "" || p.Type == "" || p.Trigger == "" || p.Now.IsZero() {
		return errors.New("ScheduleInsert: ID, Name, Model, Type, Trigger and Now are required")
	}
	return nil
}

// ScheduleListParams lists schedules.
type ScheduleListParams struct {
	// AfterName pages through the schedules, listed by name: the next page starts after the last
	// name seen. "": the first page.
	AfterName string
	// Limit bounds the result; zero means DefaultListLimit-like 500.
	Limit int
}

// ScheduleUpdateParams rewrites a schedule.
type ScheduleUpdateParams struct {
	ID uuid.UUID
	ScheduleDefinition
	Enabled    bool
	NextFireAt *time.Time
	// ClearWaiting forgets the fixed-delay execution the schedule waits on.
	ClearWaiting bool
	Now          time.Time
}

// ScheduleClaimDueParams claims due schedules.
type ScheduleClaimDueParams struct {
	Now    time.Time
	Limit  int
	Lease  time.Duration
	Holder string
}

// ScheduleFired is what one claim did.
type ScheduleFired struct {
	ID    uuid.UUID
	Fence int64
	// NextFireAt is the next tick; nil with WaitingExecutionID set for a fixed-delay schedule.
	NextFireAt         *time.Time
	WaitingExecutionID *uuid.UUID
	// LastFireAt and LastExecutionID are the last tick started; nil keeps the stored ones (the
	// claim started nothing, as when its ticks were skipped).
	LastFireAt      *time.Time
	LastExecutionID *uuid.UUID
	// Fires is how many executions the claim started.
	Fires     int
	LastError string
}

// ScheduleFiredManyParams records claims.
type ScheduleFiredManyParams struct {
	Fired []*ScheduleFired
	Now   time.Time
}

// ScheduleRearmParams re-arms fixed-delay schedules.
type ScheduleRearmParams struct {
	Now time.Time
}

// JobLeaseExecutor holds the queries of leased job rows.
type JobLeaseExecutor interface {
	// JobLeaseAcquire takes the row of job Name for Holder until Now+Lease when the job is due
	// (its next run is at or before Now) and no live lease holds it, creating the row on first
	// use. It returns the row and whether Holder got it.
	JobLeaseAcquire(ctx context.Context, params *JobLeaseAcquireParams) (*JobLeaseRow, bool, error)
	// JobLeaseRelease ends Holder's lease on job Name and sets its next run; a holder whose
	// lease was taken over writes nothing. It reports whether it wrote.
	JobLeaseRelease(ctx context.Context, params *JobLeaseReleaseParams) (bool, error)
	// JobLeaseList returns every job row ordered by name.
	JobLeaseList(ctx context.Context) ([]*JobLeaseRow, error)
}

// JobLeaseAcquireParams takes a job's row.
type JobLeaseAcquireParams struct {
	Name   string
	Holder string
	Lease  time.Duration
	Now    time.Time
}

// JobLeaseReleaseParams releases a job's row.
type JobLeaseReleaseParams struct {
	Name      string
	Holder    string
	NextRunAt time.Time
	// Error is the run's error ("" when it succeeded).
	Error string
	Now   time.Time
}

// The trigger kinds, misfire policies and sources, as in package cbtype.
const (
	TriggerCron       = cbtype.TriggerCron
	TriggerFixedRate  = cbtype.TriggerFixedRate
	TriggerFixedDelay = cbtype.TriggerFixedDelay
	MisfireFireOnce   = cbtype.MisfireFireOnce
	MisfireFireAll    = cbtype.MisfireFireAll
	MisfireSkip       = cbtype.MisfireSkip
	ScheduleFromAPI   = cbtype.ScheduleFromAPI
	ScheduleDeclared  = cbtype.ScheduleDeclared
)
