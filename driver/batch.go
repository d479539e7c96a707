package driver

import (
	"context"
	"time"

	"github.com/google/uuid"
)

// BatchRow groups commands sent together. Counts are computed from the commands themselves when
// the batch is read, so they are always current.
type BatchRow struct {
	ID          uuid.UUID               `json:"id"`
	Name        string                  `json:"name,omitempty"`
	Domain      string                  `json:"domain,omitempty"`
	TenantID    string                  `json:"tenantId,omitempty"`
	Total       int64                   `json:"total"`
	Counts      map[CommandStatus]int64 `json:"counts,omitempty"`
	CreatedAt   time.Time               `json:"createdAt"`
	CompletedAt *time.Time              `json:"completedAt,omitempty"` // set the first time every item was seen terminal
}

// Complete reports whether every command of the batch is terminal.
func (b *BatchRow) Complete() bool {
	var terminal int64
	for status, n := range b.Counts {
		if status.Terminal() {
			terminal += n
		}
	}
	return b.Total > 0 && terminal == b.Total
}

// BatchInsertParams creates a batch.
type BatchInsertParams struct {
	ID       uuid.UUID
	Name     string
	Domain   string
	TenantID string
	Total    int64
	Now      *time.Time
}

// BatchListParams pages batches newest first.
type BatchListParams struct {
	Limit int
}

// BatchExecutor holds the batch queries.
type BatchExecutor interface {
	BatchInsert(ctx context.Context, params *BatchInsertParams) error
	// BatchGet loads a batch with its counts; when every item is terminal and CompletedAt is not
	// yet set, it stamps CompletedAt.
	BatchGet(ctx context.Context, id uuid.UUID) (*BatchRow, error)
	BatchList(ctx context.Context, params *BatchListParams) ([]*BatchRow, error)
}
