package driver

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"
)

// ErrUnknownTier means a tenant names a tier that has no row in tenant_tier.
var ErrUnknownTier = errors.New("commandbus: unknown tenant tier")

// The notification topics of admission: TopicExecutions wakes the pending pollers (admitted
// executions are runnable; it is the engine's wake topic), TopicAdmission the admission
// dispatcher (a slot was freed while another transaction held its tenant's row).
const (
	TopicExecutions = "executions"
	TopicAdmission  = "admission"
)

// TenantStatus is a tenant's status: active tenants get slots; a suspended tenant's queued
// executions stay QUEUED (held) until it is active again; a deleted tenant's queued executions
// end FAILED (TENANT_DELETED), and any it starts later too.
type TenantStatus string

// The tenant statuses.
const (
	TenantActive    TenantStatus = "active"
	TenantSuspended TenantStatus = "suspended"
	TenantDeleted   TenantStatus = "deleted"
)

// Valid reports whether s is one of the three statuses.
func (s TenantStatus) Valid() bool {
	return s == TenantActive || s == TenantSuspended || s == TenantDeleted
}

// The error codes of executions the admission ends FAILED.
const (
	CodeTenantNotFound    = "TENANT_NOT_FOUND"
	CodeTenantDeleted     = "TENANT_DELETED"
	CodeUnknownDefinition = "UNKNOWN_DEFINITION"
)

// TenantTierRow is a tier and the number of executions a tenant of it may have active at once.
type TenantTierRow struct {
	Tier      string    `json:"tier"`
	MaxActive int       `json:"maxActive"`
	UpdatedAt time.Time `json:"updatedAt"`
}

// TenantRow is a tenant with its admission figures.
type TenantRow struct {
	ID     string       `json:"id"`
	Name   string       `json:"name,omitempty"`
	Tier   string       `json:"tier"`
	Status TenantStatus `json:"status"`
	// MaxActiveOverride replaces the tier's limit when set.
	MaxActiveOverride *int `json:"maxActiveOverride,omitempty"`
	// MaxActive is the limit in force: the override, or the tier's.
	MaxActive int `json:"maxActive"`
	// Active counts the executions holding a slot (admitted, not terminal).
	Active int `json:"active"`
	// Queued counts the executions waiting for a slot; OldestQueuedAt is when the oldest was
	// created.
	Queued         int        `json:"queued"`
	OldestQueuedAt *time.Time `json:"oldestQueuedAt,omitempty"`
	LastAdmittedAt *time.Time `json:"lastAdmittedAt,omitempty"`
	CreatedAt      time.Time  `json:"createdAt"`
	UpdatedAt      time.Time  `json:"updatedAt"`
}

// TenantTierUpsertParams sets a tier's limit, creating the tier if needed.
type TenantTierUpsertParams struct {
	Tier      string
	MaxActive int
	Now       *time.Time
}

// TenantInsertParams creates a tenant. Status empty means active.
type TenantInsertParams struct {
	ID                string
	Name              string
	Tier              string
	Status            TenantStatus
	MaxActiveOverride *int
	Actor             string
	Now               *time.Time
}

// TenantUpdateParams changes a tenant; nil fields keep their value. ClearOverride removes the
// override (the tier's limit applies again).
type TenantUpdateParams struct {
	ID                string
	Name              *string
	Tier              *string
	Status            *TenantStatus
	MaxActiveOverride *int
	ClearOverride     bool
	Actor             string
	Reason            string
	Now               *time.Time
}

// TenantListParams pages tenants by id; zero fields do not filter.
type TenantListParams struct {
	Status  TenantStatus
	AfterID string
	Limit   int
}

// TenantAdmission is what one admission did for one tenant.
type TenantAdmission struct {
	TenantID string
	// Admitted executions went from QUEUED to PENDING with a slot; Failed ones ended FAILED
	// (missing or deleted tenant).
	Admitted int
	Failed   int
	// Locked means another transaction held the tenant's row: nothing was done, and the
	// admission topic was notified.
	Locked bool
	// Held is the number of slots held after the admission; MaxActive the limit in force.
	Held      int
	MaxActive int
	// Status is the tenant's status, empty when the tenant does not exist.
	Status TenantStatus
}

// AtCapacity reports whether the tenant had executions to admit but no free slot.
func (a *TenantAdmission) AtCapacity() bool {
	return !a.Locked && a.Status == TenantActive && a.Held >= a.MaxActive
}

// ExecutionQueueParams turns executions just inserted (in the same transaction, PENDING, never
// claimed, with a tenant) into QUEUED ones, then admits what their tenants' free slots allow.
type ExecutionQueueParams struct {
	IDs []uuid.UUID
	Now *time.Time
}

// TenantAdmitNextParams is one round of the admission dispatcher: the tenants with queued
// executions and a free slot, served longest ago first (round-robin), up to MaxTenants, each
// admitting up to MaxPerTenant. Tenants whose row another transaction holds are skipped.
type TenantAdmitNextParams struct {
	MaxTenants   int
	MaxPerTenant int
	Now          *time.Time
}

// ExecutionFailUnknownParams ends FAILED (UNKNOWN_DEFINITION) the queued executions, and the
// admitted ones no runner has taken yet, whose type is not in KnownTypes.
type ExecutionFailUnknownParams struct {
	KnownTypes []string
	Now        *time.Time
}

// TenantExecutor holds the tenant and admission queries.
type TenantExecutor interface {
	TenantTierUpsert(ctx context.Context, params *TenantTierUpsertParams) (*TenantTierRow, error)
	TenantTierList(ctx context.Context) ([]*TenantTierRow, error)
	// TenantInsert returns ErrConflict when the id exists and ErrUnknownTier when the tier does
	// not; nothing is written then. The audit row (TENANT_CREATE) is written in the same
	// transaction.
	TenantInsert(ctx context.Context, params *TenantInsertParams) (*TenantRow, error)
	// TenantGet returns ErrNotFound.
	TenantGet(ctx context.Context, id string) (*TenantRow, error)
	TenantList(ctx context.Context, params *TenantListParams) ([]*TenantRow, error)
	// TenantUpdate changes a tenant and, in the same transaction, writes the audit row
	// (TENANT_UPDATE) and admits into newly free slots (a raised limit, a reactivation) or ends
	// FAILED the queued executions of a tenant now deleted. ErrNotFound, ErrUnknownTier.
	TenantUpdate(ctx context.Context, params *TenantUpdateParams) (*TenantRow, *TenantAdmission, error)
	// ExecutionQueue queues new executions and admits them (see ExecutionQueueParams); one
	// admission per tenant, in tenant id order.
	ExecutionQueue(ctx context.Context, params *ExecutionQueueParams) ([]*TenantAdmission, error)
	// TenantAdmitNext is one round of the admission dispatcher.
	TenantAdmitNext(ctx context.Context, params *TenantAdmitNextParams) ([]*TenantAdmission, error)
	// ExecutionFailUnknown returns the ids it failed.
	ExecutionFailUnknown(ctx context.Context, params *ExecutionFailUnknownParams) ([]uuid.UUID, error)
	// ExecutionCancelQueued ends a QUEUED execution CANCELLED (error code CANCELLED), with its
	// log entry, outbox messages and audit row in the same transaction, and returns the row
	// after. The change is conditioned on the status being QUEUED, so it and an admission of
	// the execution cannot both apply: a cancelled queued execution never held a slot.
	// ErrNotFound; ErrConflict when the execution is not QUEUED (any more) or is not of
	// params' model and type: nothing is written then.
	ExecutionCancelQueued(ctx context.Context, params *ExecutionCancelQueuedParams) (*ExecutionRow, error)
}

// ExecutionCancelQueuedParams cancels an execution still QUEUED (waiting for a tenant slot) at an
// operator's request. Model and Type must match the execution's: the caller acts on its own
// type only. Actor is required; the audit log (Action, with Details) and the execution's log (an
// entry of type Action named "cancel", with Details as request) record it with Reason.
type ExecutionCancelQueuedParams struct {
	ID      uuid.UUID
	Model   string
	Type    string
	Action  string
	Actor   string
	Reason  string
	Details []byte
	Now     *time.Time
	// Outbox, when set, is called with the cancelled row; its messages (the lifecycle event)
	// are written in the cancellation's transaction.
	Outbox OutboxOfChange
}

// Validate checks that the execution, the action and the actor are named.
func (p *ExecutionCancelQueuedParams) Validate() error {
	if p.Action == "" {
		return errors.New("ExecutionCancelQueued: an action is required")
	}
	return validateOperator("ExecutionCancelQueued", p.ID, p.Actor)
}

// QueuedCancelMessage is the error message of an execution an operator cancelled while it was
// queued.
func QueuedCancelMessage(actor, reason string) string {
	return "cancelled by " + actor + " while queued for a tenant slot: " + reason
}
