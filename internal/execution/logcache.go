package execution

import (
	"slices"

	"github.com/google/uuid"
	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/commandbus/commandbus/driver"
)

// DefaultLogCache is how many released executions' logs an engine keeps by default.
const DefaultLogCache = 10000

// logCache keeps the logs of executions this instance released while they wait (for a reply, a
// retry, a response), so that resuming one reads only the entries added since, not the whole log
// again: the log is append-only, so a log this instance once held is a valid prefix forever.
// Entries are shared between the cache and the runners that read them: nobody mutates an entry
// once it is written.
type logCache struct {
	lru *lru.Cache[uuid.UUID, []*driver.ExecutionLogEntry]
}

func newLogCache(size int) *logCache {
	if size == 0 {
		size = DefaultLogCache
	}
	if size < 0 {
		return &logCache{}
	}
	c, err := lru.New[uuid.UUID, []*driver.ExecutionLogEntry](size)
	if err != nil {
		panic(err) // only for a non-positive size, excluded above
	}
	return &logCache{lru: c}
}

// get returns the cached log of id (nil when none) and the sequence to read after.
func (c *logCache) get(id uuid.UUID) ([]*driver.ExecutionLogEntry, int64) {
	if c.lru == nil {
		return nil, 0
	}
	log, ok := c.lru.Get(id)
	if !ok || len(log) == 0 {
		return nil, 0
	}
	return log, int64(log[len(log)-1].Seq)
}

// join completes a cached log with the entries read after it. The result never shares spare
// capacity with the cache, so appending to it cannot touch the cached log. It returns false, and
// forgets the cached log, when the two do not join up.
func (c *logCache) join(id uuid.UUID, cached, read []*driver.ExecutionLogEntry) ([]*driver.ExecutionLogEntry, bool) {
	if len(cached) == 0 {
		return read, true
	}
	if len(read) > 0 && read[0].Seq != cached[len(cached)-1].Seq+1 {
		c.forget(id)
		return nil, false
	}
	return append(slices.Clip(cached), read...), true
}

// remember caches the log of an execution that was just released.
func (c *logCache) remember(id uuid.UUID, log []*driver.ExecutionLogEntry) {
	if c.lru != nil && len(log) > 0 {
		c.lru.Add(id, slices.Clip(log))
	}
}

func (c *logCache) forget(id uuid.UUID) {
	if c.lru != nil {
		c.lru.Remove(id)
	}
}

// logAfterSeqs returns the cached logs of ids and the sequences to read after, for a batch read.
func (c *logCache) logAfterSeqs(ids []uuid.UUID) ([][]*driver.ExecutionLogEntry, []int64) {
	logs, after := make([][]*driver.ExecutionLogEntry, len(ids)), make([]int64, len(ids))
	for i, id := range ids {
		logs[i], after[i] = c.get(id)
	}
	return logs, after
}
