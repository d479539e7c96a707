package payments

import (
	"fmt"
	"time"

	"github.com/google/uuid"
)

// The platform's lists are read in pages by keyset: each call reads at most Limit rows strictly
// after a cursor, the last row of the previous page, in the list's own order (its time, then its
// id). Rows written while a caller pages neither repeat nor shift the pages, as an offset would.

// MaxListRows is the most rows one list call reads: a page of 1000, the largest a route serves,
// and one more, which tells a paged caller whether another page follows.
const MaxListRows = 1001

// PageCursor marks the last row of a page of a list ordered by time and id: ListBatches,
// ListApprovals and ListPendingNetworkResponses resume strictly after it.
type PageCursor struct {
	// At is the row's time in the list's order (created or requested), to the microsecond.
	At time.Time
	ID uuid.UUID
}

// ListParams page a list: at most Limit rows (default 50 for batches, 100 otherwise; at most
// MaxListRows), after After (nil: from the start).
type ListParams struct {
	Limit int
	After *PageCursor
}

// ApprovalFilter narrows and pages ListApprovals.
type ApprovalFilter struct {
	// Status is the approvals' status; default PENDING.
	Status string
	// Limit and After page the list as ListParams do.
	Limit int
	After *PageCursor
}

// PaymentCursor marks the last payment of a page of ListPayments; the next page starts after it.
// Take it from the payment with PaymentCursorOf.
type PaymentCursor struct {
	CreatedAt time.Time
	ID        uuid.UUID
	// ExecutionID orders the lists filtered by a process status, which are read by process,
	// newest process first.
	ExecutionID uuid.UUID
}

// PaymentCursorOf returns the cursor that resumes ListPayments after v.
func PaymentCursorOf(v *PaymentView) PaymentCursor {
	return PaymentCursor{CreatedAt: v.CreatedAt, ID: v.ID, ExecutionID: v.ExecutionID}
}

// listLimit is a call's row limit: def when not given, at most MaxListRows.
func listLimit(limit, def int) int {
	if limit <= 0 {
		return def
	}
	return min(limit, MaxListRows)
}

// keysetAfter is the SQL condition, with its arguments numbered from next, that keeps the rows
// after cursor in the order "timeColumn, id" (ascending) or "timeColumn DESC, id DESC"; "" when
// cursor is nil. It reads the same on both drivers: times are integer microseconds, ids text.
func keysetAfter(cursor *PageCursor, timeColumn string, descending bool, next int) (string, []any) {
	if cursor == nil {
		return "", nil
	}
	op := ">"
	if descending {
		op = "<"
	}
	return fmt.Sprintf("(%[1]s %[2]s $%[3]d OR (%[1]s = $%[3]d AND id %[2]s $%[4]d))", timeColumn, op, next, next+1),
		[]any{cursor.At.UnixMicro(), cursor.ID.String()}
}
