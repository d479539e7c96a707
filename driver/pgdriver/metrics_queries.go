package pgdriver

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/commandbus/commandbus/driver"
)

func (e *executor) MetricsQueues(ctx context.Context, now *time.Time) ([]*driver.QueueMetrics, error) {
	rows, err := e.db.Query(ctx, e.d.sql(`
		WITH n AS (SELECT coalesce($1::timestamptz, now()) AS now)
		SELECT queue, domain,
			count(*) FILTER (WHERE status = 'PENDING' AND visible_at <= n.now),
			count(*) FILTER (WHERE status = 'PENDING' AND visible_at > n.now),
			count(*) FILTER (WHERE status = 'RUNNING'),
			count(*) FILTER (WHERE status = 'RUNNING' AND lease_until <= n.now),
			min(visible_at) FILTER (WHERE status = 'PENDING' AND visible_at <= n.now)
		FROM {schema}.command, n WHERE completed_at IS NULL AND parked_at IS NULL
		GROUP BY queue, domain ORDER BY queue, domain`), now)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (*driver.QueueMetrics, error) {
		var q driver.QueueMetrics
		err := row.Scan(&q.Queue, &q.Domain, &q.Ready, &q.Scheduled, &q.Running, &q.ExpiredLeases, &q.OldestReady)
		return &q, err
	})
}

func (e *executor) MetricsExecutions(ctx context.Context, now *time.Time) ([]*driver.ExecutionMetrics, error) {
	rows, err := e.db.Query(ctx, e.d.sql(`
		WITH n AS (SELECT coalesce($1::timestamptz, now()) AS now)
		SELECT model, type, status, count(*),
			count(*) FILTER (WHERE status IN ('EXECUTING', 'COMPENSATING') AND lease_until <= n.now)
		FROM {schema}.execution, n
		WHERE status NOT IN ('COMPLETED', 'COMPENSATED', 'CANCELLED', 'FAILED')
		GROUP BY model, type, status ORDER BY model, type, status`), now)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (*driver.ExecutionMetrics, error) {
		var m driver.ExecutionMetrics
		var status string
		err := row.Scan(&m.Model, &m.Type, &status, &m.Count, &m.ExpiredLeases)
		m.Status = driver.ExecutionStatus(status)
		return &m, err
	})
}

// MetricsOutboxHorizon reads the oldest writing transaction of the server (transaction ids, and
// so the horizon, are server-wide) and the NEW outbox rows at or above the horizon. It runs in
// no transaction id of its own, so it holds nothing back.
func (e *executor) MetricsOutboxHorizon(ctx context.Context) (*driver.HorizonMetrics, error) {
	var h driver.HorizonMetrics
	var seconds float64
	err := e.db.QueryRow(ctx, e.d.sql(`
		SELECT
			(SELECT coalesce(extract(epoch FROM clock_timestamp() - min(xact_start)), 0)::float8
			 FROM pg_stat_activity WHERE backend_xid IS NOT NULL AND pid <> pg_backend_pid()),
			(SELECT count(*) FROM {schema}.outbox
			 WHERE status = 'NEW' AND txid >= pg_snapshot_xmin(pg_current_snapshot()))`)).Scan(&seconds, &h.HeldMessages)
	if err != nil {
		return nil, err
	}
	h.OldestTransaction = time.Duration(seconds * float64(time.Second))
	return &h, nil
}
