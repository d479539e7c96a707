package commandbus

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/commandbus/commandbus/driver"
)

// Batch groups commands sent together. Its counts by status are computed from the commands
// when read, so they are always current; it is complete when every command is terminal.
type Batch = driver.BatchRow

// BatchParams creates a batch with its commands.
type BatchParams struct {
	// ID of the batch; generated when zero.
	ID       uuid.UUID
	Name     string
	TenantID string
	// Commands are sent in the batch's transaction; each gets the batch id.
	Commands []SendParams
}

// CreateBatch creates a batch and sends its commands atomically.
func (c *Client) CreateBatch(ctx context.Context, params BatchParams) (*Batch, error) {
	if len(params.Commands) == 0 {
		return nil, &ValidationError{Field: "commands", Message: "a batch needs at least one command"}
	}
	id := params.ID
	if id == uuid.Nil {
		id = uuid.Must(uuid.NewV7())
	}
	sends := make([]SendParams, len(params.Commands))
	domain := params.Commands[0].Domain
	for i, p := range params.Commands {
		opts := SendOpts{}
		if p.Opts != nil {
			opts = *p.Opts
		}
		opts.BatchID = id
		if opts.TenantID == "" {
			opts.TenantID = params.TenantID
		}
		p.Opts = &opts
		sends[i] = p
		if p.Domain != domain {
			domain = ""
		}
	}
	inserts, err := c.buildInserts(sends)
	if err != nil {
		return nil, err
	}
	var topics []string
	err = driver.WithTx(ctx, c.exec, func(tx driver.ExecutorTx) error {
		if err := tx.BatchInsert(ctx, &driver.BatchInsertParams{
			ID: id, Name: params.Name, Domain: domain, TenantID: params.TenantID,
			Total: int64(len(inserts)), Now: c.now(),
		}); err != nil {
			return fmt.Errorf("creating batch: %w", err)
		}
		results, err := tx.CommandInsertMany(ctx, &driver.CommandInsertManyParams{Commands: inserts, Now: c.now()})
		if err != nil {
			return fmt.Errorf("sending batch commands: %w", err)
		}
		seen := map[string]bool{}
		for i, r := range results {
			if !r.Inserted {
				return &ValidationError{Field: "commands", Message: fmt.Sprintf("command %d: idempotency key %q already used by command %s; a batch cannot include it", i, inserts[i].IdempotencyKey, r.ID)}
			}
			if t := queueTopic(inserts[i].Queue); !seen[t] {
				seen[t] = true
				topics = append(topics, t)
			}
		}
		return tx.Notify(ctx, topics)
	})
	if err != nil {
		return nil, err
	}
	return c.GetBatch(ctx, id)
}

// GetBatch returns a batch with current counts, or ErrNotFound.
func (c *Client) GetBatch(ctx context.Context, id uuid.UUID) (*Batch, error) {
	return c.exec.BatchGet(ctx, id)
}

// ListBatches returns recent batches, newest first.
func (c *Client) ListBatches(ctx context.Context, limit int) ([]*Batch, error) {
	return c.exec.BatchList(ctx, &driver.BatchListParams{Limit: limit})
}
