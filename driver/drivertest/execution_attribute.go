package drivertest

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus/driver"
)

func attributesOf(t *testing.T, exec driver.Executor, id uuid.UUID) map[string]string {
	t.Helper()
	attrs, err := exec.ExecutionAttributes(context.Background(), id)
	require.NoError(t, err)
	return attrs
}

func exerciseExecutionAttributes(t *testing.T, setup setupFunc) {
	ctx := context.Background()

	t.Run("SetAtInsertAndByCheckpoints", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p := newLeasedExecution("Pay", time.Hour)
		p.Attributes = map[string]string{"customer": "c-1", "order.id": "o-1", "skipped": ""}
		other := newExecution("Pay")
		insertExecutions(t, b.exec, &t0, p, other)
		require.Equal(t, map[string]string{"customer": "c-1", "order.id": "o-1"}, attributesOf(t, b.exec, p.ID),
			"an empty value is not stored")
		require.Equal(t, map[string]string{}, attributesOf(t, b.exec, other.ID))
		require.Equal(t, map[string]string{}, attributesOf(t, b.exec, uuid.New()), "an unknown execution has none")

		// A checkpoint upserts, removes a key with an empty value and keeps the keys it does not name.
		require.Equal(t, []uuid.UUID{p.ID}, checkpoint(t, b.exec, t0, &driver.ExecutionCheckpoint{
			ID: p.ID, Fence: 1, Status: driver.ExecutionExecuting,
			Attributes: map[string]string{"customer": "c-2", "order.id": "", "region": "eu", "never-set": ""},
		}))
		require.Equal(t, map[string]string{"customer": "c-2", "region": "eu"}, attributesOf(t, b.exec, p.ID))

		// A fenced checkpoint writes no attribute.
		require.Empty(t, checkpoint(t, b.exec, t0, &driver.ExecutionCheckpoint{
			ID: p.ID, Fence: 7, Status: driver.ExecutionExecuting,
			Attributes: map[string]string{"customer": "stale", "fenced": "yes"},
		}))
		require.Equal(t, map[string]string{"customer": "c-2", "region": "eu"}, attributesOf(t, b.exec, p.ID))

		// In a batch, each checkpoint writes its own execution's attributes.
		q := newLeasedExecution("Pay", time.Hour)
		insertExecutions(t, b.exec, &t0, q)
		require.ElementsMatch(t, []uuid.UUID{p.ID, q.ID}, checkpoint(t, b.exec, t0,
			&driver.ExecutionCheckpoint{ID: p.ID, Fence: 1, Status: driver.ExecutionExecuting, Attributes: map[string]string{"region": "us"}},
			&driver.ExecutionCheckpoint{ID: q.ID, Fence: 1, Status: driver.ExecutionExecuting, Attributes: map[string]string{"region": "eu"}},
		))
		require.Equal(t, map[string]string{"customer": "c-2", "region": "us"}, attributesOf(t, b.exec, p.ID))
		require.Equal(t, map[string]string{"region": "eu"}, attributesOf(t, b.exec, q.ID))
	})

	t.Run("Validation", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		for _, attrs := range []map[string]string{
			{"": "v"},
			{"has space": "v"},
			{"ключ": "v"},
			{strings.Repeat("k", driver.MaxAttributeKeyLength+1): "v"},
			{"k": strings.Repeat("v", driver.MaxAttributeValueLength+1)},
			{"k": "a\x00b"},
			{"k": "\xff"},
		} {
			p := newExecution("Pay")
			p.Attributes = attrs
			_, err := b.exec.ExecutionInsertMany(ctx, &driver.ExecutionInsertManyParams{Executions: []*driver.ExecutionInsertParams{p}, Now: &t0})
			require.ErrorIs(t, err, driver.ErrInvalidAttribute, "%v", attrs)
			_, err = b.exec.ExecutionGet(ctx, p.ID)
			require.ErrorIs(t, err, driver.ErrNotFound, "nothing is inserted with an invalid attribute")
		}
		p := newLeasedExecution("Pay", time.Hour)
		insertExecutions(t, b.exec, &t0, p)
		_, err := b.exec.ExecutionCheckpointMany(ctx, &driver.ExecutionCheckpointManyParams{Now: &t0, Checkpoints: []*driver.ExecutionCheckpoint{{
			ID: p.ID, Fence: 1, Status: driver.ExecutionCompleted, Attributes: map[string]string{"bad key": "v"},
		}}})
		require.ErrorIs(t, err, driver.ErrInvalidAttribute)
		require.Equal(t, driver.ExecutionExecuting, getExecution(t, b.exec, p.ID).Status, "the checkpoint did not apply")
		_, err = b.exec.ExecutionList(ctx, &driver.ExecutionListParams{Attributes: map[string]string{"k": ""}})
		require.ErrorIs(t, err, driver.ErrInvalidAttribute)
		// The largest key and value are accepted.
		q := newExecution("Pay")
		q.Attributes = map[string]string{strings.Repeat("k", driver.MaxAttributeKeyLength): strings.Repeat("v", driver.MaxAttributeValueLength)}
		insertExecutions(t, b.exec, &t0, q)
		require.Equal(t, q.Attributes, attributesOf(t, b.exec, q.ID))
	})

	t.Run("Search", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		a := newExecution("Pay")
		a.Attributes = map[string]string{"customer": "c-1", "region": "eu"}
		c := newExecution("Pay")
		c.Attributes = map[string]string{"customer": "c-1", "region": "us"}
		d := newExecution("Ship")
		d.Attributes = map[string]string{"customer": "c-1", "region": "eu"}
		e := newExecution("Pay")
		e.Attributes = map[string]string{"customer": "c-2", "region": "eu"}
		insertExecutions(t, b.exec, &t0, a, c, d, e)
		list := func(params driver.ExecutionListParams) []uuid.UUID {
			t.Helper()
			rows, err := b.exec.ExecutionList(ctx, &params)
			require.NoError(t, err)
			return executionIDs(rows)
		}
		require.Equal(t, []uuid.UUID{d.ID, c.ID, a.ID}, list(driver.ExecutionListParams{Attributes: map[string]string{"customer": "c-1"}}))
		require.Equal(t, []uuid.UUID{d.ID, a.ID}, list(driver.ExecutionListParams{Attributes: map[string]string{"customer": "c-1", "region": "eu"}}),
			"every attribute must match")
		require.Equal(t, []uuid.UUID{a.ID}, list(driver.ExecutionListParams{Type: "Pay", Attributes: map[string]string{"customer": "c-1", "region": "eu"}}))
		require.Empty(t, list(driver.ExecutionListParams{Attributes: map[string]string{"customer": "c-3"}}))
		require.Empty(t, list(driver.ExecutionListParams{Attributes: map[string]string{"region": "c-1"}}), "a value matches under its own key only")
		// Paged as any list.
		require.Equal(t, []uuid.UUID{d.ID, c.ID}, list(driver.ExecutionListParams{Limit: 2, Attributes: map[string]string{"customer": "c-1"}}))
		require.Equal(t, []uuid.UUID{a.ID}, list(driver.ExecutionListParams{Limit: 2, BeforeID: c.ID, Attributes: map[string]string{"customer": "c-1"}}))
	})
}

func exerciseExecutionDeleteExpired(t *testing.T, setup setupFunc) {
	ctx := context.Background()

	t.Run("OnlyEndedAndOldEnough", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		// end inserts a leased execution at t0, with a log entry, a response and an attribute,
		// and checkpoints it into status at endedAt.
		end := func(status driver.ExecutionStatus, endedAt time.Time) uuid.UUID {
			t.Helper()
			p := newLeasedExecution("Pay", time.Hour)
			p.Attributes = map[string]string{"customer": "c-1"}
			p.Log = []*driver.ExecutionLogEntry{{Seq: 1, EntryType: "LIFECYCLE", StepStatus: "PROCESS_CREATED"}}
			insertExecutions(t, b.exec, &t0, p)
			_, err := b.exec.ExecutionResponseInsert(ctx, &driver.ExecutionResponseInsertParams{ExecutionID: p.ID, Name: "charged", Payload: json.RawMessage(`{}`), Now: &t0})
			require.NoError(t, err)
			require.Equal(t, []uuid.UUID{p.ID}, checkpoint(t, b.exec, endedAt, &driver.ExecutionCheckpoint{
				ID: p.ID, Fence: 1, Status: status, Release: true,
				Log: []*driver.ExecutionLogEntry{{Seq: 2, EntryType: "LIFECYCLE", StepStatus: string(status)}},
			}))
			return p.ID
		}
		cutoff := t0.Add(24 * time.Hour)
		old := []uuid.UUID{
			end(driver.ExecutionCompleted, t0.Add(time.Hour)),
			end(driver.ExecutionCompensated, t0.Add(2*time.Hour)),
			end(driver.ExecutionCancelled, t0.Add(3*time.Hour)),
			end(driver.ExecutionFailed, t0.Add(4*time.Hour)),
		}
		recent := end(driver.ExecutionCompleted, cutoff) // completed exactly at the cutoff: kept
		waiting := end(driver.ExecutionWaitingForAsync, t0.Add(time.Hour))
		parked := end(driver.ExecutionWaitingForTSQ, t0.Add(time.Hour))
		pending := newExecution("Pay")
		insertExecutions(t, b.exec, &t0, pending)

		n, err := b.exec.ExecutionDeleteExpired(ctx, &driver.ExecutionDeleteExpiredParams{Before: cutoff, Limit: 10})
		require.NoError(t, err)
		require.Equal(t, len(old), n)
		for _, id := range old {
			_, err := b.exec.ExecutionGet(ctx, id)
			require.ErrorIs(t, err, driver.ErrNotFound)
			require.Empty(t, logList(t, b.exec, id), "the log goes with the execution")
			responses, err := b.exec.ExecutionResponseList(ctx, id, 0)
			require.NoError(t, err)
			require.Empty(t, responses, "the responses go with the execution")
			require.Empty(t, attributesOf(t, b.exec, id), "the attributes go with the execution")
		}
		for _, id := range []uuid.UUID{recent, waiting, parked, pending.ID} {
			getExecution(t, b.exec, id)
		}
		for _, id := range []uuid.UUID{recent, waiting, parked} {
			require.Len(t, logList(t, b.exec, id), 2, "a kept execution keeps its log")
			require.Equal(t, map[string]string{"customer": "c-1"}, attributesOf(t, b.exec, id))
			responses, err := b.exec.ExecutionResponseList(ctx, id, 0)
			require.NoError(t, err)
			require.Len(t, responses, 1)
		}

		n, err = b.exec.ExecutionDeleteExpired(ctx, &driver.ExecutionDeleteExpiredParams{Before: cutoff})
		require.NoError(t, err)
		require.Zero(t, n, "nothing more is due")
	})

	t.Run("BatchLimitOldestFirst", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		var ended []uuid.UUID
		for i := range 5 {
			p := newLeasedExecution("Pay", time.Hour)
			insertExecutions(t, b.exec, &t0, p)
			// Completed in the reverse of their creation order, so oldest-first is by completion.
			park(t, b.exec, t0.Add(time.Duration(10-i)*time.Minute), p.ID, driver.ExecutionCompleted, nil)
			ended = append(ended, p.ID)
		}
		before := t0.Add(time.Hour)
		n, err := b.exec.ExecutionDeleteExpired(ctx, &driver.ExecutionDeleteExpiredParams{Before: before, Limit: 2})
		require.NoError(t, err)
		require.Equal(t, 2, n)
		rows, err := b.exec.ExecutionList(ctx, &driver.ExecutionListParams{})
		require.NoError(t, err)
		require.ElementsMatch(t, ended[:3], executionIDs(rows), "the two that completed first are deleted")

		n, err = b.exec.ExecutionDeleteExpired(ctx, &driver.ExecutionDeleteExpiredParams{Before: before, Limit: 2})
		require.NoError(t, err)
		require.Equal(t, 2, n)
		n, err = b.exec.ExecutionDeleteExpired(ctx, &driver.ExecutionDeleteExpiredParams{Before: before, Limit: 2})
		require.NoError(t, err)
		require.Equal(t, 1, n)
		rows, err = b.exec.ExecutionList(ctx, &driver.ExecutionListParams{})
		require.NoError(t, err)
		require.Empty(t, rows)

		_, err = b.exec.ExecutionDeleteExpired(ctx, &driver.ExecutionDeleteExpiredParams{})
		require.Error(t, err, "Before is required")
	})
}
