package tcc

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
)

// BranchID names one participant's branch of a transaction: the key of its barrier records.
type BranchID struct {
	// Transaction is the transaction's id.
	Transaction string `json:"transaction"`
	// Participant is the participant's id.
	Participant string `json:"participant"`
}

func (b BranchID) validate() error {
	var errs []error
	if b.Transaction == "" {
		errs = append(errs, &commandbus.ValidationError{Field: "branch.transaction", Message: "required"})
	}
	if b.Participant == "" {
		errs = append(errs, &commandbus.ValidationError{Field: "branch.participant", Message: "required"})
	}
	return errors.Join(errs...)
}

// BarrierOutcome says what a barrier did with a phase.
type BarrierOutcome string

// The barrier's outcomes.
const (
	// BarrierApplied: the phase ran (its function was called) and is recorded.
	BarrierApplied BarrierOutcome = "APPLIED"
	// BarrierDuplicate: the phase was applied before; its function was not called.
	BarrierDuplicate BarrierOutcome = "DUPLICATE"
	// BarrierEmptyCancel: a cancel arrived before any try; it is recorded (a later try is
	// refused) and succeeds without calling its function, since nothing was reserved.
	BarrierEmptyCancel BarrierOutcome = "EMPTY_CANCEL"
)

// CodeTryAfterCancel is the code of ErrTryAfterCancel.
const CodeTryAfterCancel = "TRY_AFTER_CANCEL"

// ErrTryAfterCancel refuses a try that arrives after its branch was cancelled (a hanging try):
// reserving then would hold resources nobody releases. Barrier.Try returns it wrapped in a
// permanent error, so the coordinator does not retry it.
var ErrTryAfterCancel = &commandbus.Error{Code: CodeTryAfterCancel, Message: "the branch was cancelled before this try arrived"}

// Barrier makes a participant's phases safe against the deliveries a network makes: duplicated,
// late and out of order. Each method runs inside the participant's own database transaction (a
// pgx.Tx on PostgreSQL, a *sql.Tx on SQLite, begun on the database commandbus uses), records the
// phase there and calls fn, which does the participant's work in the same transaction:
//
//   - a phase delivered again does nothing (BarrierDuplicate): try, confirm and cancel are
//     idempotent;
//   - a cancel with no try before it records the fact and succeeds without calling fn
//     (BarrierEmptyCancel);
//   - a try that arrives after its cancel is refused with ErrTryAfterCancel and calls nothing
//     (no hanging reservation).
//
// When fn fails, the caller rolls its transaction back and the record goes with it, so a retry
// of the phase runs fn again. Concurrent deliveries of one phase serialize on the record: the
// second waits for the first transaction and then finds it applied.
type Barrier struct {
	drv driver.Driver
	now func() *time.Time
}

// NewBarrier returns a barrier on the database drv reaches (the tcc_barrier table of migration
// 9).
func NewBarrier(drv driver.Driver) *Barrier {
	return &Barrier{drv: drv, now: func() *time.Time { return nil }}
}

// Try records the branch's try in tx and calls fn, unless the try was applied before
// (BarrierDuplicate) or the branch was cancelled first (ErrTryAfterCancel).
func (b *Barrier) Try(ctx context.Context, tx any, branch BranchID, fn func(ctx context.Context) error) (BarrierOutcome, error) {
	exec, err := b.exec(tx, branch)
	if err != nil {
		return "", err
	}
	first, err := b.insert(ctx, exec, branch, PhaseTry, PhaseTry)
	if err != nil || first {
		return b.apply(ctx, fn, err)
	}
	row, err := exec.TccBarrierGet(ctx, branch.Transaction, branch.Participant, string(PhaseTry))
	if err != nil {
		return "", fmt.Errorf("tcc barrier: reading the try of %s/%s: %w", branch.Transaction, branch.Participant, err)
	}
	if row.Origin == string(PhaseCancel) {
		return "", commandbus.Permanent(CodeTryAfterCancel, fmt.Errorf("branch %s/%s: %w", branch.Transaction, branch.Participant, ErrTryAfterCancel))
	}
	return BarrierDuplicate, nil
}

// Confirm records the branch's confirm in tx and calls fn, unless it was applied before
// (BarrierDuplicate).
func (b *Barrier) Confirm(ctx context.Context, tx any, branch BranchID, fn func(ctx context.Context) error) (BarrierOutcome, error) {
	exec, err := b.exec(tx, branch)
	if err != nil {
		return "", err
	}
	first, err := b.insert(ctx, exec, branch, PhaseConfirm, PhaseConfirm)
	if err != nil || first {
		return b.apply(ctx, fn, err)
	}
	return BarrierDuplicate, nil
}

// Cancel records the branch's cancel in tx and calls fn, unless it was applied before
// (BarrierDuplicate) or no try came before it (BarrierEmptyCancel: recorded, fn not called, and
// a later try is refused).
func (b *Barrier) Cancel(ctx context.Context, tx any, branch BranchID, fn func(ctx context.Context) error) (BarrierOutcome, error) {
	exec, err := b.exec(tx, branch)
	if err != nil {
		return "", err
	}
	// Taking the try's place first: if it is free, no try came, and none may come after.
	empty, err := b.insert(ctx, exec, branch, PhaseTry, PhaseCancel)
	if err != nil {
		return "", err
	}
	first, err := b.insert(ctx, exec, branch, PhaseCancel, PhaseCancel)
	switch {
	case err != nil:
		return "", err
	case !first:
		return BarrierDuplicate, nil
	case empty:
		return BarrierEmptyCancel, nil
	}
	return b.apply(ctx, fn, nil)
}

func (b *Barrier) exec(tx any, branch BranchID) (driver.Executor, error) {
	if err := branch.validate(); err != nil {
		return nil, err
	}
	if tx == nil {
		return nil, &commandbus.ValidationError{Field: "tx", Message: "the barrier runs inside the participant's transaction; pass it"}
	}
	exec, err := b.drv.UnwrapTx(tx)
	if err != nil {
		return nil, fmt.Errorf("tcc barrier: %w", err)
	}
	return exec, nil
}

func (b *Barrier) insert(ctx context.Context, exec driver.Executor, branch BranchID, phase, origin Phase) (bool, error) {
	first, err := exec.TccBarrierInsert(ctx, &driver.TccBarrierInsertParams{
		Transaction: branch.Transaction, Participant: branch.Participant, Phase: string(phase), Origin: string(origin), Now: b.now(),
	})
	if err != nil {
		return false, fmt.Errorf("tcc barrier: recording the %s of %s/%s: %w", phase, branch.Transaction, branch.Participant, err)
	}
	return first, nil
}

func (b *Barrier) apply(ctx context.Context, fn func(ctx context.Context) error, err error) (BarrierOutcome, error) {
	if err != nil {
		return "", err
	}
	if fn != nil {
		if err := fn(ctx); err != nil {
			return "", err
		}
	}
	return BarrierApplied, nil
}
