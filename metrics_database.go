package commandbus

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/commandbus/commandbus/driver"
)

// databaseMetricsTTL is how long one reading of the database serves scrapes: several Prometheus
// servers (or a scrape and the console's sampler) scraping at once cost one set of queries.
const databaseMetricsTTL = 5 * time.Second

// databaseMetricsTimeout bounds the queries of one reading; a scrape never waits longer.
const databaseMetricsTimeout = 5 * time.Second

// databaseCollector reports, at scrape time, what the database holds that no single replica
// counts: queue depths and the age of the oldest ready command, unfinished executions by model,
// type and status (the execution TSQ among them), expired leases not yet rescued, and the
// transaction horizon the outbox relay waits behind. Its queries count unfinished work only (see
// driver.MetricsExecutor for their cost); one reading serves the scrapes of databaseMetricsTTL. A query that fails leaves its metrics out of
// that scrape, with a warning.
type databaseCollector struct {
	exec   driver.Executor
	queues func() []string // the queues to report even when empty
	now    func() *time.Time
	clock  func() time.Time
	logger *slog.Logger

	queueDepth, queueOldest, queueExpired *prometheus.Desc
	active, tsq, executionExpired         *prometheus.Desc
	oldestTransaction, horizonHeld        *prometheus.Desc

	mu      sync.Mutex
	readAt  time.Time
	reading []prometheus.Metric
}

func newDatabaseCollector(exec driver.Executor, queues func() []string, now func() *time.Time, clock func() time.Time, logger *slog.Logger) *databaseCollector {
	queue := []string{"queue", "domain"}
	execution := []string{"model", "type"}
	return &databaseCollector{
		exec: exec, queues: queues, now: now, clock: clock, logger: logger,
		queueDepth: prometheus.NewDesc("commandbus_queue_depth",
			"Unfinished commands in a queue, by queue, domain and state (ready: visible now; scheduled: waiting for a retry's backoff; running).",
			[]string{"queue", "domain", "state"}, nil),
		queueOldest: prometheus.NewDesc("commandbus_queue_oldest_ready_seconds",
			"How long the oldest ready command of a queue has been waiting to be claimed (0 when none is ready).", queue, nil),
		queueExpired: prometheus.NewDesc("commandbus_queue_expired_leases",
			"RUNNING commands whose lease has passed and that no worker or watchdog has taken back yet.", queue, nil),
		active: prometheus.NewDesc("commandbus_executions_active",
			"Unfinished executions, by model, type and status (terminal statuses are counted by commandbus_executions_ended_total).",
			[]string{"model", "type", "status"}, nil),
		tsq: prometheus.NewDesc("commandbus_execution_tsq_depth",
			"Executions waiting in the troubleshooting queue (WAITING_FOR_TSQ) for an operator, by model and type.", execution, nil),
		executionExpired: prometheus.NewDesc("commandbus_executions_expired_leases",
			"Executions whose runner's lease has passed and that the pending poller has not rescued yet.", execution, nil),
		oldestTransaction: prometheus.NewDesc("commandbus_database_oldest_transaction_seconds",
			"Age of the oldest open writing transaction on the PostgreSQL server: the outbox relay publishes nothing written after it began.", nil, nil),
		horizonHeld: prometheus.NewDesc("commandbus_outbox_horizon_held_messages",
			"Unpublished outbox messages at or above the transaction horizon: committed, but held until older transactions end (PostgreSQL).", nil, nil),
	}
}

// Describe sends the descriptions of every metric the collector reports.
func (c *databaseCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.queueDepth, c.queueOldest, c.queueExpired, c.active, c.tsq, c.executionExpired,
		c.oldestTransaction, c.horizonHeld} {
		ch <- d
	}
}

// Collect sends the current reading, reading the database when the last reading is too old.
func (c *databaseCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.reading == nil || time.Since(c.readAt) >= databaseMetricsTTL {
		c.reading, c.readAt = c.read(), time.Now()
	}
	for _, m := range c.reading {
		ch <- m
	}
}

// read queries the database once.
func (c *databaseCollector) read() []prometheus.Metric {
	ctx, cancel := context.WithTimeout(context.Background(), databaseMetricsTimeout)
	defer cancel()
	out := []prometheus.Metric{}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		out = append(out, prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...))
	}
	now := c.clock()
	if queues, err := c.exec.MetricsQueues(ctx, c.now()); err != nil {
		c.logger.Warn("metrics: reading the queue depths failed; left out of this scrape", "error", err)
	} else {
		// One series per queue, its domain read from its name (a reply queue's rows carry the
		// replying domain), and zeros for the queues this instance works that hold nothing.
		byQueue := map[string]*driver.QueueMetrics{}
		var order []string
		add := func(queue, domain string) *driver.QueueMetrics {
			q, ok := byQueue[queue]
			if !ok {
				q = &driver.QueueMetrics{Queue: queue, Domain: queueDomain(queue, domain)}
				byQueue[queue] = q
				order = append(order, queue)
			}
			return q
		}
		for _, r := range queues {
			q := add(r.Queue, r.Domain)
			q.Ready, q.Scheduled, q.Running, q.ExpiredLeases = q.Ready+r.Ready, q.Scheduled+r.Scheduled, q.Running+r.Running, q.ExpiredLeases+r.ExpiredLeases
			if r.OldestReady != nil && (q.OldestReady == nil || r.OldestReady.Before(*q.OldestReady)) {
				q.OldestReady = r.OldestReady
			}
		}
		if c.queues != nil {
			for _, queue := range c.queues() {
				add(queue, "")
			}
		}
		for _, name := range order {
			q := byQueue[name]
			gauge(c.queueDepth, float64(q.Ready), q.Queue, q.Domain, "ready")
			gauge(c.queueDepth, float64(q.Scheduled), q.Queue, q.Domain, "scheduled")
			gauge(c.queueDepth, float64(q.Running), q.Queue, q.Domain, "running")
			gauge(c.queueExpired, float64(q.ExpiredLeases), q.Queue, q.Domain)
			age := 0.0
			if q.OldestReady != nil {
				age = max(0, now.Sub(*q.OldestReady).Seconds())
			}
			gauge(c.queueOldest, age, q.Queue, q.Domain)
		}
	}
	if executions, err := c.exec.MetricsExecutions(ctx, c.now()); err != nil {
		c.logger.Warn("metrics: counting the unfinished executions failed; left out of this scrape", "error", err)
	} else {
		type key struct{ model, typ string }
		tsq, expired := map[key]int64{}, map[key]int64{}
		for _, x := range executions {
			k := key{x.Model, x.Type}
			gauge(c.active, float64(x.Count), x.Model, x.Type, string(x.Status))
			inTSQ := int64(0)
			if x.Status == driver.ExecutionWaitingForTSQ {
				inTSQ = x.Count
			}
			tsq[k] += inTSQ // every (model, type) with unfinished executions reports a depth, 0 included
			expired[k] += x.ExpiredLeases
		}
		for k, n := range tsq {
			gauge(c.tsq, float64(n), k.model, k.typ)
			gauge(c.executionExpired, float64(expired[k]), k.model, k.typ)
		}
	}
	if horizon, err := c.exec.MetricsOutboxHorizon(ctx); err == nil {
		gauge(c.oldestTransaction, horizon.OldestTransaction.Seconds())
		gauge(c.horizonHeld, float64(horizon.HeldMessages))
	} else if !errors.Is(err, driver.ErrNoHorizon) {
		c.logger.Warn("metrics: reading the outbox horizon failed; left out of this scrape", "error", err)
	}
	return out
}

// queueDomain is the domain a queue belongs to: the one its name carries (CommandQueue,
// ReplyQueue), else the domain of its rows.
func queueDomain(queue, rowDomain string) string {
	for _, suffix := range []string{commandQueueSuffix, replyQueueSuffix} {
		if domain, ok := strings.CutSuffix(queue, suffix); ok && domain != "" {
			return domain
		}
	}
	return rowDomain
}
