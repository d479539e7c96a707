package execution

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/batching"
)

// acquirer groups immediate acquires (a reply or response arriving for an execution) into one
// statement per batch, as the checkpointer groups checkpoints: under load, hundreds of replies a
// second each need their execution leased and its log read, and one round trip for many of them
// costs the database far less than one each.
type acquirer struct {
	engine *Engine
	group  *batching.Group[*acquireRequest]
}

type acquireRequest struct {
	id   uuid.UUID
	done chan acquireResult
}

type acquireResult struct {
	lease *Lease
	err   error
}

const (
	maxAcquireBatch      = 200
	maxConcurrentAcquire = 2
)

func newAcquirer(e *Engine) *acquirer {
	a := &acquirer{engine: e}
	a.group = batching.New(maxAcquireBatch, maxConcurrentAcquire, a.flush)
	return a
}

// acquire leases the execution and reads its log (the part this instance has not cached); the
// lease reads stored responses later, only if its row shows some. It returns ErrBusy when a live
// lease holds the execution and driver.ErrNotFound when it does not exist.
func (a *acquirer) acquire(ctx context.Context, id uuid.UUID) (*Lease, error) {
	req := &acquireRequest{id: id, done: make(chan acquireResult, 1)}
	a.group.Submit(req)
	select {
	case res := <-req.done:
		return res.lease, res.err
	case <-ctx.Done():
		// The acquire may still succeed: give the lease back rather than leave it to expire.
		go func() {
			if res := <-req.done; res.lease != nil {
				releaseCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				_ = res.lease.Release(releaseCtx)
				cancel()
			}
		}()
		return nil, ctx.Err()
	}
}

func (a *acquirer) flush(batch []*acquireRequest) {
	// One request per id acquires it; a second request for the same id finds it busy, exactly as
	// if it had come a moment later.
	byID := make(map[uuid.UUID][]*acquireRequest, len(batch))
	ids := make([]uuid.UUID, 0, len(batch))
	for _, req := range batch {
		if byID[req.id] == nil {
			ids = append(ids, req.id)
		}
		byID[req.id] = append(byID[req.id], req)
	}
	e := a.engine
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cached, logAfter := e.logs.logAfterSeqs(ids)
	acquired, err := e.cfg.Exec.ExecutionAcquireLoadMany(ctx, &driver.ExecutionAcquireManyParams{
		IDs: ids, LogAfterSeq: logAfter, Lease: e.cfg.Lease, WorkerID: e.cfg.WorkerID, Now: e.cfg.Now(),
	})
	if err != nil {
		if len(ids) > 1 {
			// One bad id (or a lock conflict) must not fail the others: acquire them one by one.
			for _, id := range ids {
				a.flush(byID[id])
			}
			return
		}
		for _, req := range batch {
			req.done <- acquireResult{err: err}
		}
		return
	}
	cachedByID := make(map[uuid.UUID][]*driver.ExecutionLogEntry, len(ids))
	for i, id := range ids {
		cachedByID[id] = cached[i]
	}
	for _, x := range acquired {
		reqs := byID[x.Row.ID]
		delete(byID, x.Row.ID)
		lease := e.newLease(x.Row)
		var ok bool
		if x.Loaded.Log, ok = e.logs.join(x.Row.ID, cachedByID[x.Row.ID], x.Loaded.Log); ok {
			lease.loaded = x.Loaded // else the runner reads the whole log
		}
		reqs[0].done <- acquireResult{lease: lease}
		for _, req := range reqs[1:] {
			req.done <- acquireResult{err: ErrBusy}
		}
	}
	// The rest are held by a live lease, or do not exist.
	for id, reqs := range byID {
		err := ErrBusy
		if _, getErr := e.cfg.Exec.ExecutionGet(ctx, id); getErr != nil {
			err = getErr
		}
		for _, req := range reqs {
			req.done <- acquireResult{err: err}
		}
	}
}
