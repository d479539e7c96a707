package outbox

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/commandbus/commandbus/driver"
)

// Metrics are the reliable-messaging metric collectors. A client creates one Metrics and shares
// it with its relay, inbox and transports.
type Metrics struct {
	// PublishLatency is outbox_publish_latency_ms: from the row's write to the broker's
	// acknowledgement, by transport.
	PublishLatency *prometheus.HistogramVec
	// Published counts messages published, by transport and category.
	Published *prometheus.CounterVec
	// PublishFailures counts failed publications, by transport.
	PublishFailures *prometheus.CounterVec
	// Claims counts the relay's claims of the outbox by result: claimed (it leased messages) or
	// empty. Empty claims are what a relay's polling costs the database.
	Claims *prometheus.CounterVec
	// HandedOff counts the messages handed to a relay right after their commit (Relay.Handoff)
	// by outcome: taken (published by the hand-off) or left (to the claims).
	HandedOff *prometheus.CounterVec
	// Backlog is the outbox backlog: unpublished messages by transport, category and status
	// (NEW or FAILED), refreshed by the relay.
	Backlog *prometheus.GaugeVec
	// OldestUnpublished is the age in seconds of the oldest NEW message, by transport.
	OldestUnpublished *prometheus.GaugeVec
	// InboxDedupeHits is inbox_dedupe_hits_total: duplicate deliveries the inbox absorbed, by
	// handler.
	InboxDedupeHits *prometheus.CounterVec
	// Consumed counts messages a transport consumer settled, by queue and result (processed,
	// duplicate, dead_lettered, parked, requeued after a database failure, backed_out to the
	// queue's backout queue).
	Consumed *prometheus.CounterVec
	// BrokerDeadLetters counts messages the broker backed out (delivered more often than the
	// queue's backout threshold), by queue and result: parked (their command moved to the
	// troubleshooting queue), already_done (their command had ended), kept (no command to park:
	// left on the backout queue for an operator).
	BrokerDeadLetters *prometheus.CounterVec
}

// NewMetrics returns the collectors, registered with reg when it is not nil. Collectors already
// registered there (by another client) are reused.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		PublishLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "commandbus_outbox_publish_latency_ms",
			Help:    "Outbox publish latency in milliseconds: from the outbox row's write to the broker's acknowledgement.",
			Buckets: []float64{1, 2, 5, 10, 20, 50, 100, 250, 500, 1000, 5000, 30000},
		}, []string{"transport"}),
		Published: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "commandbus_outbox_published_total",
			Help: "Outbox messages published, by transport and category.",
		}, []string{"transport", "category"}),
		PublishFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "commandbus_outbox_publish_failures_total",
			Help: "Outbox publications that failed and were deferred (or given up), by transport.",
		}, []string{"transport"}),
		Claims: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "commandbus_outbox_claims_total",
			Help: "Outbox claims by the relays, by result (claimed, empty).",
		}, []string{"result"}),
		HandedOff: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "commandbus_outbox_handed_off_total",
			Help: "Outbox messages handed to a relay right after their commit, by outcome (taken: published at once from memory; left: to the claims).",
		}, []string{"outcome"}),
		Backlog: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "commandbus_outbox_backlog",
			Help: "Unpublished outbox messages, by transport, category and status (NEW or FAILED).",
		}, []string{"transport", "category", "status"}),
		OldestUnpublished: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "commandbus_outbox_oldest_unpublished_seconds",
			Help: "Age of the oldest unpublished outbox message, by transport.",
		}, []string{"transport"}),
		InboxDedupeHits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "commandbus_inbox_dedupe_hits_total",
			Help: "Duplicate deliveries absorbed by the inbox, by handler.",
		}, []string{"handler"}),
		Consumed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "commandbus_transport_consumed_total",
			Help: "Broker messages settled by consumers, by queue and result (processed, duplicate, dead_lettered, parked, requeued, backed_out).",
		}, []string{"queue", "result"}),
		BrokerDeadLetters: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "commandbus_transport_broker_dead_letters_total",
			Help: "Messages the broker backed out after the backout threshold, by work queue and result (parked, already_done, kept; filed for a reply filed from the reply queue's backout queue).",
		}, []string{"queue", "result"}),
	}
	if reg == nil {
		return m, nil
	}
	register := func(c prometheus.Collector) (prometheus.Collector, error) {
		if err := reg.Register(c); err != nil {
			var already prometheus.AlreadyRegisteredError
			if errors.As(err, &already) {
				return already.ExistingCollector, nil
			}
			return nil, err
		}
		return c, nil
	}
	var err error
	reuse := func(target any, c prometheus.Collector) {
		if err != nil {
			return
		}
		var got prometheus.Collector
		if got, err = register(c); err != nil {
			return
		}
		switch t := target.(type) {
		case **prometheus.HistogramVec:
			*t = got.(*prometheus.HistogramVec)
		case **prometheus.CounterVec:
			*t = got.(*prometheus.CounterVec)
		case **prometheus.GaugeVec:
			*t = got.(*prometheus.GaugeVec)
		case *prometheus.Counter:
			*t = got.(prometheus.Counter)
		}
	}
	reuse(&m.PublishLatency, m.PublishLatency)
	reuse(&m.Published, m.Published)
	reuse(&m.PublishFailures, m.PublishFailures)
	reuse(&m.Claims, m.Claims)
	reuse(&m.HandedOff, m.HandedOff)
	reuse(&m.Backlog, m.Backlog)
	reuse(&m.OldestUnpublished, m.OldestUnpublished)
	reuse(&m.InboxDedupeHits, m.InboxDedupeHits)
	reuse(&m.Consumed, m.Consumed)
	reuse(&m.BrokerDeadLetters, m.BrokerDeadLetters)
	if err != nil {
		return nil, err
	}
	return m, nil
}

func newDefaultMetrics() *Metrics {
	m, _ := NewMetrics(nil)
	return m
}

// SetBacklog replaces the backlog gauges with a fresh count.
func (m *Metrics) SetBacklog(backlog []*driver.OutboxBacklog, ageSeconds func(*driver.OutboxBacklog) float64) {
	m.Backlog.Reset()
	m.OldestUnpublished.Reset()
	oldest := map[string]float64{}
	for _, b := range backlog {
		m.Backlog.WithLabelValues(b.Transport, string(b.Category), string(driver.OutboxStatusNew)).Set(float64(b.New))
		m.Backlog.WithLabelValues(b.Transport, string(b.Category), string(driver.OutboxStatusFailed)).Set(float64(b.Failed))
		if b.OldestNew != nil {
			if age := ageSeconds(b); age > oldest[b.Transport] {
				oldest[b.Transport] = age
			}
		}
	}
	for transport, age := range oldest {
		m.OldestUnpublished.WithLabelValues(transport).Set(age)
	}
}
