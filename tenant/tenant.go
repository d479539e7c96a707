package tenant

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/plumbing"
)

// The default tiers.
const (
	TierFree       = "FREE"
	TierPro        = "PRO"
	TierEnterprise = "ENTERPRISE"
)

// DefaultTierLimits are the tiers' limits (executions active at once per tenant) unless
// configured otherwise.
var DefaultTierLimits = map[string]int{TierFree: 1, TierPro: 5, TierEnterprise: 20}

// Tenant is a tenant with its admission figures: the limit in force, the slots held, the queue.
type Tenant = driver.TenantRow

// Tier is a tier and its limit.
type Tier = driver.TenantTierRow

// Admission is what an update admitted or failed.
type Admission = driver.TenantAdmission

// Status is a tenant's status (see the package doc for what each means for its executions).
type Status = driver.TenantStatus

// The tenant statuses.
const (
	StatusActive    = driver.TenantActive
	StatusSuspended = driver.TenantSuspended
	StatusDeleted   = driver.TenantDeleted
)

var (
	idPattern   = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$`)
	tierPattern = regexp.MustCompile(`^[A-Z][A-Z0-9_]{0,31}$`)
)

// Service reads and changes tenants and tiers. It is safe for concurrent use.
type Service struct {
	exec driver.Executor
	now  func() *time.Time
}

// New returns the tenant service of client.
func New(client *commandbus.Client) *Service {
	return &Service{exec: client.Driver().Executor(), now: plumbing.DriverClock(client)}
}

// NewWithExecutor returns a service on exec; now gives the time to write (nil: the database's).
func NewWithExecutor(exec driver.Executor, now func() *time.Time) *Service {
	if now == nil {
		now = func() *time.Time { return nil }
	}
	return &Service{exec: exec, now: now}
}

// CreateRequest creates a tenant. Status empty means active.
type CreateRequest struct {
	ID                string `json:"id"`
	Name              string `json:"name,omitempty"`
	Tier              string `json:"tier"`
	Status            Status `json:"status,omitempty"`
	MaxActiveOverride *int   `json:"maxActiveOverride,omitempty"`
	// Actor is who creates it, for the audit log.
	Actor string `json:"-"`
}

// UpdateRequest changes a tenant; nil fields keep their value. ClearOverride removes the
// tenant's own limit (its tier's applies again).
type UpdateRequest struct {
	Name              *string `json:"name,omitempty"`
	Tier              *string `json:"tier,omitempty"`
	Status            *Status `json:"status,omitempty"`
	MaxActiveOverride *int    `json:"maxActiveOverride,omitempty"`
	ClearOverride     bool    `json:"clearOverride,omitempty"`
	// Actor and Reason are recorded in the audit log.
	Actor  string `json:"-"`
	Reason string `json:"reason,omitempty"`
}

// ListRequest pages tenants by id.
type ListRequest struct {
	Status  Status
	AfterID string
	Limit   int
}

func validateID(id string) error {
	if !idPattern.MatchString(id) {
		return &commandbus.ValidationError{Field: "id", Message: "must be 1 to 128 letters, digits or . _ : @ - starting with a letter or digit"}
	}
	return nil
}

func validateTier(field, tier string) error {
	if !tierPattern.MatchString(tier) {
		return &commandbus.ValidationError{Field: field, Message: fmt.Sprintf("%q is not a tier name (upper-case letters, digits, _)", tier)}
	}
	return nil
}

func validateStatus(s Status) error {
	if !s.Valid() {
		return &commandbus.ValidationError{Field: "status", Message: fmt.Sprintf("%q is not active, suspended or deleted", s)}
	}
	return nil
}

func validateLimit(field string, n *int) error {
	if n != nil && *n < 0 {
		return &commandbus.ValidationError{Field: field, Message: "must not be negative"}
	}
	return nil
}

// unknownTier turns the driver's unknown tier into a validation error on field.
func unknownTier(err error, field, tier string) error {
	if errors.Is(err, driver.ErrUnknownTier) {
		return &commandbus.ValidationError{Field: field, Message: fmt.Sprintf("no tier %q", tier)}
	}
	return err
}

// Create creates a tenant. Invalid input (every problem at once), an unknown tier or a
// duplicate id is a *commandbus.ValidationError naming the field, and nothing is written.
func (s *Service) Create(ctx context.Context, req CreateRequest) (*Tenant, error) {
	var errs []error
	errs = append(errs, validateID(req.ID), validateTier("tier", req.Tier), validateLimit("maxActiveOverride", req.MaxActiveOverride))
	if req.Status != "" {
		errs = append(errs, validateStatus(req.Status))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	row, err := s.exec.TenantInsert(ctx, &driver.TenantInsertParams{ID: req.ID, Name: req.Name, Tier: req.Tier, Status: req.Status,
		MaxActiveOverride: req.MaxActiveOverride, Actor: req.Actor, Now: s.now()})
	if errors.Is(err, driver.ErrConflict) {
		return nil, &commandbus.ValidationError{Field: "id", Message: fmt.Sprintf("tenant %q exists already", req.ID)}
	}
	if err != nil {
		return nil, unknownTier(err, "tier", req.Tier)
	}
	return row, nil
}

// Get returns a tenant, or an error wrapping commandbus.ErrNotFound.
func (s *Service) Get(ctx context.Context, id string) (*Tenant, error) {
	row, err := s.exec.TenantGet(ctx, id)
	if errors.Is(err, driver.ErrNotFound) {
		return nil, fmt.Errorf("tenant %q: %w", id, commandbus.ErrNotFound)
	}
	return row, err
}

// List returns tenants in id order.
func (s *Service) List(ctx context.Context, req ListRequest) ([]*Tenant, error) {
	if req.Status != "" {
		if err := validateStatus(req.Status); err != nil {
			return nil, err
		}
	}
	return s.exec.TenantList(ctx, &driver.TenantListParams{Status: req.Status, AfterID: req.AfterID, Limit: req.Limit})
}

// Update changes a tenant and, in the same transaction, audits the change and applies it to
// the queue: a raised limit or a reactivation admits at once, a deletion fails the queued
// executions. Invalid input is a *commandbus.ValidationError naming the field, and nothing is
// written; an unknown tenant wraps commandbus.ErrNotFound.
func (s *Service) Update(ctx context.Context, id string, req UpdateRequest) (*Tenant, *Admission, error) {
	var errs []error
	if req.Tier != nil {
		errs = append(errs, validateTier("tier", *req.Tier))
	}
	if req.Status != nil {
		errs = append(errs, validateStatus(*req.Status))
	}
	errs = append(errs, validateLimit("maxActiveOverride", req.MaxActiveOverride))
	if req.ClearOverride && req.MaxActiveOverride != nil {
		errs = append(errs, &commandbus.ValidationError{Field: "clearOverride", Message: "cannot be set with maxActiveOverride"})
	}
	if err := errors.Join(errs...); err != nil {
		return nil, nil, err
	}
	row, admission, err := s.exec.TenantUpdate(ctx, &driver.TenantUpdateParams{ID: id, Name: req.Name, Tier: req.Tier, Status: req.Status,
		MaxActiveOverride: req.MaxActiveOverride, ClearOverride: req.ClearOverride, Actor: req.Actor, Reason: req.Reason, Now: s.now()})
	switch {
	case errors.Is(err, driver.ErrNotFound):
		return nil, nil, fmt.Errorf("tenant %q: %w", id, commandbus.ErrNotFound)
	case err != nil:
		tier := ""
		if req.Tier != nil {
			tier = *req.Tier
		}
		return nil, nil, unknownTier(err, "tier", tier)
	}
	if admission.Admitted > 0 {
		_ = s.exec.Notify(ctx, []string{driver.TopicExecutions})
	}
	return row, admission, nil
}

// Tiers returns the tiers, smallest limit first.
func (s *Service) Tiers(ctx context.Context) ([]*Tier, error) { return s.exec.TenantTierList(ctx) }

// SetTierLimit sets a tier's limit, creating the tier if needed. A raised limit is picked up by
// the admission dispatcher's next round.
func (s *Service) SetTierLimit(ctx context.Context, tier string, maxActive int) (*Tier, error) {
	if err := errors.Join(validateTier("tier", tier), validateLimit("maxActive", &maxActive)); err != nil {
		return nil, err
	}
	row, err := s.exec.TenantTierUpsert(ctx, &driver.TenantTierUpsertParams{Tier: tier, MaxActive: maxActive, Now: s.now()})
	if err != nil {
		return nil, err
	}
	_ = s.exec.Notify(ctx, []string{driver.TopicAdmission})
	return row, nil
}

// ApplyTierLimits sets every tier's limit of limits.
func (s *Service) ApplyTierLimits(ctx context.Context, limits map[string]int) error {
	for tier, n := range limits {
		if _, err := s.SetTierLimit(ctx, tier, n); err != nil {
			return fmt.Errorf("tier %s: %w", tier, err)
		}
	}
	return nil
}
