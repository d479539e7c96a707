package tenant

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/commandbus/commandbus/driver"
)

// DefaultMaxTenantGauges bounds the per-tenant gauges: only this many tenants (in id order)
// get an active and a queued series.
const DefaultMaxTenantGauges = 100

// Metrics are the admission's Prometheus collectors. They count whether registered or not.
type Metrics struct {
	batchSize      prometheus.Histogram
	cycleDuration  prometheus.Histogram
	dispatched     prometheus.Counter
	atCapacity     prometheus.Counter
	failed         *prometheus.CounterVec
	staleRecovered prometheus.Counter
	lockFailures   prometheus.Counter
	tenants        *tenantGauges
}

// NewMetrics returns the admission metrics, registered on reg when it is not nil (a second
// registration on the same registry shares the first one's collectors). The per-tenant gauges
// read exec at scrape time, for at most maxTenantGauges tenants (0: DefaultMaxTenantGauges;
// negative: none).
func NewMetrics(reg prometheus.Registerer, exec driver.Executor, maxTenantGauges int) (*Metrics, error) {
	m := &Metrics{
		batchSize: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "commandbus_admission_batch_size",
			Help:    "Tenants served per round of the admission dispatcher.",
			Buckets: []float64{0, 1, 2, 5, 10, 20, 50, 100, 200},
		}),
		cycleDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "commandbus_admission_cycle_duration_seconds",
			Help:    "Duration of one round of the admission dispatcher.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1},
		}),
		dispatched: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "commandbus_admission_dispatched_total",
			Help: "Executions admitted into a tenant's slot (at their start or from the queue) by this instance's admissions; hand-overs at a release are not counted here.",
		}),
		atCapacity: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "commandbus_admission_at_capacity_total",
			Help: "Executions queued at their start because their tenant had no free slot (deferrals, not attempts).",
		}),
		failed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "commandbus_admission_failed_total",
			Help: "Executions the admission ended FAILED, by reason (TENANT_NOT_FOUND, TENANT_DELETED, UNKNOWN_DEFINITION).",
		}, []string{"reason"}),
		staleRecovered: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "commandbus_admission_stale_recovered_total",
			Help: "Executions claimed again after their runner's lease expired (stale claims recovered).",
		}),
		lockFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "commandbus_admission_lock_failures_total",
			Help: "Tenants an admission round skipped because another transaction held their row.",
		}),
	}
	if maxTenantGauges == 0 {
		maxTenantGauges = DefaultMaxTenantGauges
	}
	if maxTenantGauges > 0 && exec != nil {
		m.tenants = &tenantGauges{exec: exec, max: maxTenantGauges,
			active: prometheus.NewDesc("commandbus_tenant_active_executions", "Executions holding a slot of the tenant.", []string{"tenant"}, nil),
			queued: prometheus.NewDesc("commandbus_tenant_queued_executions", "Executions of the tenant waiting for a slot.", []string{"tenant"}, nil),
			limit:  prometheus.NewDesc("commandbus_tenant_max_active_executions", "The tenant's limit in force.", []string{"tenant"}, nil),
		}
	}
	if reg == nil {
		return m, nil
	}
	var err error
	if m.batchSize, err = register(reg, m.batchSize); err != nil {
		return nil, err
	}
	if m.cycleDuration, err = register(reg, m.cycleDuration); err != nil {
		return nil, err
	}
	if m.dispatched, err = register(reg, m.dispatched); err != nil {
		return nil, err
	}
	if m.atCapacity, err = register(reg, m.atCapacity); err != nil {
		return nil, err
	}
	if m.failed, err = register(reg, m.failed); err != nil {
		return nil, err
	}
	if m.staleRecovered, err = register(reg, m.staleRecovered); err != nil {
		return nil, err
	}
	if m.lockFailures, err = register(reg, m.lockFailures); err != nil {
		return nil, err
	}
	if m.tenants != nil {
		if err := reg.Register(m.tenants); err != nil {
			var are prometheus.AlreadyRegisteredError
			if !errors.As(err, &are) {
				return nil, err
			}
		}
	}
	return m, nil
}

func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing, nil
			}
		}
		return c, err
	}
	return c, nil
}

// Admitted counts admitted executions.
func (m *Metrics) Admitted(_ string, n int) { m.dispatched.Add(float64(n)) }

// AtCapacity counts deferrals.
func (m *Metrics) AtCapacity(_ string, n int) { m.atCapacity.Add(float64(n)) }

// Failed counts executions ended FAILED by code.
func (m *Metrics) Failed(code string, n int) { m.failed.WithLabelValues(code).Add(float64(n)) }

// Cycle observes one admission round.
func (m *Metrics) Cycle(tenants int, took time.Duration) {
	m.batchSize.Observe(float64(tenants))
	m.cycleDuration.Observe(took.Seconds())
}

// LockFailures counts tenants skipped because their row was locked.
func (m *Metrics) LockFailures(n int) { m.lockFailures.Add(float64(n)) }

// StaleRecovered counts stale claims recovered.
func (m *Metrics) StaleRecovered(n int) { m.staleRecovered.Add(float64(n)) }

// tenantGauges reads the per-tenant figures at scrape time, for a bounded number of tenants.
type tenantGauges struct {
	exec                  driver.Executor
	max                   int
	active, queued, limit *prometheus.Desc
}

func (g *tenantGauges) Describe(ch chan<- *prometheus.Desc) {
	ch <- g.active
	ch <- g.queued
	ch <- g.limit
}

func (g *tenantGauges) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	rows, err := g.exec.TenantList(ctx, &driver.TenantListParams{Limit: g.max})
	if err != nil {
		return // a scrape without these series beats a failed scrape
	}
	for _, t := range rows {
		ch <- prometheus.MustNewConstMetric(g.active, prometheus.GaugeValue, float64(t.Active), t.ID)
		ch <- prometheus.MustNewConstMetric(g.queued, prometheus.GaugeValue, float64(t.Queued), t.ID)
		ch <- prometheus.MustNewConstMetric(g.limit, prometheus.GaugeValue, float64(t.MaxActive), t.ID)
	}
}
