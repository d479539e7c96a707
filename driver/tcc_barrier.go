package driver

import (
	"context"
	"time"
)

// TccBarrierExecutor keeps the records of the participant-side TCC barrier: one row per phase a
// participant's branch applied (or, for an empty cancel, the try it will refuse), written in the
// participant's own transaction.
type TccBarrierExecutor interface {
	// TccBarrierInsert records a phase of a branch and reports whether this was the first write;
	// false means a record of that phase exists, and nothing was written. In a transaction it
	// waits for a concurrent transaction writing the same record to end.
	TccBarrierInsert(ctx context.Context, params *TccBarrierInsertParams) (bool, error)
	// TccBarrierGet returns the record of a phase of a branch, or ErrNotFound.
	TccBarrierGet(ctx context.Context, transaction, participant, phase string) (*TccBarrierRow, error)
}

// TccBarrierInsertParams is one barrier record.
type TccBarrierInsertParams struct {
	Transaction string
	Participant string
	// Phase is the phase recorded: TRY, CONFIRM or CANCEL.
	Phase string
	// Origin is the phase that wrote the record: the phase itself, or CANCEL for the TRY record
	// an empty cancel writes so that a late try is refused.
	Origin string
	Now    *time.Time
}

// TccBarrierRow is a barrier record.
type TccBarrierRow struct {
	Transaction string
	Participant string
	Phase       string
	Origin      string
	CreatedAt   time.Time
}
