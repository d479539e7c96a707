package commandbus

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/commandbus/commandbus/driver"
)

// metrics are the client's Prometheus collectors. They are registered only when
// Config.MetricsRegisterer is set; otherwise they still count, unexported.
type metrics struct {
	handledTotal    *prometheus.CounterVec
	handlerDuration *prometheus.HistogramVec
	handlersRunning *prometheus.GaugeVec
	fenceRejections prometheus.Counter
	dlqDepth        *prometheus.GaugeVec
	claimedTotal    *prometheus.CounterVec
	leaseExpiries   *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		handledTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "commandbus_commands_handled_total",
			Help: "Commands and replies handled, by domain, kind and result (success, transient, permanent, business).",
		}, []string{"domain", "kind", "result"}),
		handlerDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "commandbus_handler_duration_seconds",
			Help:    "Time spent in command and reply handlers.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"domain", "kind"}),
		handlersRunning: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "commandbus_handlers_running",
			Help: "Handlers running now on this instance, by domain and queue; at most concurrent-messages.",
		}, []string{"domain", "queue"}),
		fenceRejections: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "commandbus_outcomes_fenced_total",
			Help: "Handler outcomes discarded because the command's lease had passed to another claim.",
		}),
		dlqDepth: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "commandbus_dlq_depth",
			Help: "Commands parked in the dead-letter queue (command_dlq, the troubleshooting queue), by domain.",
		}, []string{"domain"}),
		claimedTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "commandbus_commands_claimed_total",
			Help: "Commands and replies this instance claimed (its workers from the queue table, its broker consumers by id), by domain and queue.",
		}, []string{"domain", "queue"}),
		leaseExpiries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "commandbus_command_lease_expiries_total",
			Help: "Commands whose handler's lease expired, as the watchdog found them (delivered again or timed out), by domain.",
		}, []string{"domain"}),
	}
	if reg != nil {
		// A second client on the same registry shares the first one's collectors, so both count.
		var err error
		if m.handledTotal, err = register(reg, m.handledTotal); err != nil {
			return nil, err
		}
		if m.handlerDuration, err = register(reg, m.handlerDuration); err != nil {
			return nil, err
		}
		if m.handlersRunning, err = register(reg, m.handlersRunning); err != nil {
			return nil, err
		}
		if m.fenceRejections, err = register(reg, m.fenceRejections); err != nil {
			return nil, err
		}
		if m.dlqDepth, err = register(reg, m.dlqDepth); err != nil {
			return nil, err
		}
		if m.claimedTotal, err = register(reg, m.claimedTotal); err != nil {
			return nil, err
		}
		if m.leaseExpiries, err = register(reg, m.leaseExpiries); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *metrics) handled(row *driver.CommandRow, err error, took time.Duration) {
	result := "success"
	if err != nil {
		switch class, _, _ := classify(err); class {
		case ClassBusiness:
			result = "business"
		case ClassPermanent:
			result = "permanent"
		default:
			result = "transient"
		}
	}
	m.handledTotal.WithLabelValues(row.Domain, string(row.Kind), result).Inc()
	m.handlerDuration.WithLabelValues(row.Domain, string(row.Kind)).Observe(took.Seconds())
}

func (m *metrics) running(domain, queue string, n int) {
	m.handlersRunning.WithLabelValues(domain, queue).Set(float64(n))
}

func (m *metrics) fenceRejected() { m.fenceRejections.Inc() }

func (m *metrics) claimed(domain, queue string, n int) {
	if n > 0 {
		m.claimedTotal.WithLabelValues(domain, queue).Add(float64(n))
	}
}

func (m *metrics) leaseExpired(domain string) { m.leaseExpiries.WithLabelValues(domain).Inc() }

// register registers c, or returns the collector already registered under its name.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	if err := reg.Register(c); err != nil {
		var already prometheus.AlreadyRegisteredError
		if errors.As(err, &already) {
			if existing, ok := already.ExistingCollector.(C); ok {
				return existing, nil
			}
		}
		return c, err
	}
	return c, nil
}
