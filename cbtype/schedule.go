package cbtype

import (
	"encoding/json"
	"time"

	"github.com/google/uuid"
)

// TriggerKind says how a schedule computes its ticks.
type TriggerKind string

// The trigger kinds.
const (
	// TriggerCron fires on a six-field cron expression (seconds first) in a time zone.
	TriggerCron TriggerKind = "CRON"
	// TriggerFixedRate fires every interval, measured from the first tick, whatever the
	// executions it starts do.
	TriggerFixedRate TriggerKind = "FIXED_RATE"
	// TriggerFixedDelay fires an interval after the execution it started last has ended.
	TriggerFixedDelay TriggerKind = "FIXED_DELAY"
)

// MisfirePolicy says what a schedule does with ticks it missed (the service was down, or the
// schedule was claimed later than the misfire threshold).
type MisfirePolicy string

// The misfire policies.
const (
	// MisfireFireOnce starts one execution for all missed ticks, now, then continues with the
	// next tick. The default.
	MisfireFireOnce MisfirePolicy = "FIRE_ONCE"
	// MisfireFireAll starts one execution for every missed tick, oldest first, at most the
	// schedule's misfire limit of them; further missed ticks are skipped.
	MisfireFireAll MisfirePolicy = "FIRE_ALL"
	// MisfireSkip starts nothing for missed ticks and continues with the next tick.
	MisfireSkip MisfirePolicy = "SKIP"
)

// ScheduleSource says where a schedule comes from.
type ScheduleSource string

// The schedule sources.
const (
	// ScheduleFromAPI was created at runtime (REST, CLI, console, library call).
	ScheduleFromAPI ScheduleSource = "API"
	// ScheduleDeclared was declared in code with a definition and is kept in line with the
	// declaration when the scheduler starts.
	ScheduleDeclared ScheduleSource = "DECLARED"
)

// ScheduleRow is a stored schedule.
type ScheduleRow struct {
	ID    uuid.UUID `json:"id"`
	Name  string    `json:"name"`
	Model string    `json:"model"`
	Type  string    `json:"type"`
	// Trigger is how ticks are computed; Cron and Zone are set for TriggerCron, Interval for the
	// fixed kinds.
	Trigger      TriggerKind     `json:"trigger"`
	Cron         string          `json:"cron,omitempty"`
	Zone         string          `json:"zone,omitempty"`
	Interval     time.Duration   `json:"-"`
	InitialDelay time.Duration   `json:"-"`
	Input        json.RawMessage `json:"input"`
	Description  string          `json:"description,omitempty"`
	Enabled      bool            `json:"enabled"`
	Misfire      MisfirePolicy   `json:"misfirePolicy"`
	MisfireLimit int             `json:"misfireLimit,omitempty"`
	Source       ScheduleSource  `json:"source"`
	SpecHash     string          `json:"-"`
	// NextFireAt is the next tick; nil while disabled or while a fixed-delay schedule waits for
	// WaitingExecutionID to end.
	NextFireAt         *time.Time `json:"nextFireAt,omitempty"`
	WaitingExecutionID *uuid.UUID `json:"waitingExecutionId,omitempty"`
	LastFireAt         *time.Time `json:"lastFireAt,omitempty"`
	LastExecutionID    *uuid.UUID `json:"lastExecutionId,omitempty"`
	LastError          string     `json:"lastError,omitempty"`
	FireCount          int64      `json:"fireCount"`
	LeaseUntil         *time.Time `json:"leaseUntil,omitempty"`
	LeaseHolder        string     `json:"leaseHolder,omitempty"`
	Fence              int64      `json:"fence"`
	CreatedAt          time.Time  `json:"createdAt"`
	UpdatedAt          time.Time  `json:"updatedAt"`
}

// JobLeaseRow is the leased row of a periodic job that runs once per tick across replicas.
type JobLeaseRow struct {
	Name string `json:"name"`
	// Holder is the replica running the job now ("" when nobody is); LeaseUntil ends its claim.
	Holder     string     `json:"holder,omitempty"`
	LeaseUntil *time.Time `json:"leaseUntil,omitempty"`
	// NextRunAt is when the job may run next.
	NextRunAt      time.Time  `json:"nextRunAt"`
	LastHolder     string     `json:"lastHolder,omitempty"`
	LastStartedAt  *time.Time `json:"lastStartedAt,omitempty"`
	LastFinishedAt *time.Time `json:"lastFinishedAt,omitempty"`
	LastError      string     `json:"lastError,omitempty"`
	Runs           int64      `json:"runs"`
}
