package amqp

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// deadLetterCollector reports the depth of the dead-letter and parking queues when scraped.
type deadLetterCollector struct {
	url      string
	topology Topology
	desc     *prometheus.Desc
}

// DeadLetterCollector returns a Prometheus collector of commandbus_transport_dead_letter_depth
// {queue}: the messages waiting in topology's dead-letter queue (APP.DLQ) and parking queue
// (APP.PARKED.Q), read from the broker at each scrape (within 2s; a broker that does not answer
// reports nothing). Alert on it: a message there carries no command this database will run
// until an operator redrives it (commandbus dlq list --broker, dlq redrive).
func DeadLetterCollector(url string, topology Topology) prometheus.Collector {
	return &deadLetterCollector{url: url, topology: topology, desc: prometheus.NewDesc(
		"commandbus_transport_dead_letter_depth",
		"Messages waiting in the broker's dead-letter and parking queues, by queue.", []string{"queue"}, nil)}
}

// Describe sends the gauge's description.
func (c *deadLetterCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect reads the queues' depths from the broker.
func (c *deadLetterCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	report, err := ListDeadLetters(ctx, c.url, c.topology, 0)
	if err != nil {
		return
	}
	for queue, n := range report.Counts {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n), queue)
	}
}
