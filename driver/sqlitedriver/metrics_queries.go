package sqlitedriver

import (
	"context"
	"database/sql"
	"time"

	"github.com/commandbus/commandbus/driver"
)

func (e *executor) MetricsQueues(ctx context.Context, at *time.Time) ([]*driver.QueueMetrics, error) {
	nowUS := micros(now(at))
	rows, err := e.read.QueryContext(ctx, e.d.sql(`
		SELECT queue, domain,
			sum(status = 'PENDING' AND visible_at <= ?1),
			sum(status = 'PENDING' AND visible_at > ?1),
			sum(status = 'RUNNING'),
			sum(status = 'RUNNING' AND lease_until <= ?1),
			min(CASE WHEN status = 'PENDING' AND visible_at <= ?1 THEN visible_at END)
		FROM {schema}.command WHERE completed_at IS NULL AND parked_at IS NULL
		GROUP BY queue, domain ORDER BY queue, domain`), nowUS)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*driver.QueueMetrics
	for rows.Next() {
		var q driver.QueueMetrics
		var oldest sql.NullInt64
		if err := rows.Scan(&q.Queue, &q.Domain, &q.Ready, &q.Scheduled, &q.Running, &q.ExpiredLeases, &oldest); err != nil {
			return nil, err
		}
		q.OldestReady = fromNullMicros(oldest)
		out = append(out, &q)
	}
	return out, rows.Err()
}

func (e *executor) MetricsExecutions(ctx context.Context, at *time.Time) ([]*driver.ExecutionMetrics, error) {
	rows, err := e.read.QueryContext(ctx, e.d.sql(`
		SELECT model, type, status, count(*),
			sum(status IN ('EXECUTING', 'COMPENSATING') AND lease_until <= ?)
		FROM {schema}.execution
		WHERE status NOT IN ('COMPLETED', 'COMPENSATED', 'CANCELLED', 'FAILED')
		GROUP BY model, type, status ORDER BY model, type, status`), micros(now(at)))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*driver.ExecutionMetrics
	for rows.Next() {
		var m driver.ExecutionMetrics
		var status string
		if err := rows.Scan(&m.Model, &m.Type, &status, &m.Count, &m.ExpiredLeases); err != nil {
			return nil, err
		}
		m.Status = driver.ExecutionStatus(status)
		out = append(out, &m)
	}
	return out, rows.Err()
}

// MetricsOutboxHorizon: SQLite has one writer and no horizon; its rows are publishable once
// committed.
func (e *executor) MetricsOutboxHorizon(context.Context) (*driver.HorizonMetrics, error) {
	return nil, driver.ErrNoHorizon
}
