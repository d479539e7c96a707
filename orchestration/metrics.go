package orchestration

import (
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/execution"
)

// maxStepLabels bounds the step label per (model, type): steps past it are counted as "other",
// so a definition that names its steps after data (a fan-out over ids) cannot grow the series
// without end.
const maxStepLabels = 64

// otherStep is the step label of the steps past maxStepLabels.
const otherStep = "other"

// executionMetrics are the execution engine's Prometheus collectors: what this instance's
// commits did to executions of every model, labelled by model and type (and step), never by an
// id.
type executionMetrics struct {
	started      *prometheus.CounterVec
	ended        *prometheus.CounterVec
	duration     *prometheus.HistogramVec
	parked       *prometheus.CounterVec
	steps        *prometheus.CounterVec
	stepDuration *prometheus.HistogramVec
	stepRetries  *prometheus.CounterVec
	compensation *prometheus.CounterVec
	compSteps    *prometheus.CounterVec
	rescued      *prometheus.CounterVec

	mu        sync.Mutex
	stepNames map[[2]string]map[string]bool
}

// newExecutionMetrics registers the collectors with reg; collectors another runtime registered
// there already are shared.
func newExecutionMetrics(reg prometheus.Registerer) (*executionMetrics, error) {
	execution := []string{"model", "type"}
	step := []string{"model", "type", "step"}
	m := &executionMetrics{
		started: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "commandbus_executions_started_total",
			Help: "Executions that made their first progress, by model and type.",
		}, execution),
		ended: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "commandbus_executions_ended_total",
			Help: "Executions that reached a terminal status, by model, type and status (COMPLETED, FAILED, COMPENSATED, CANCELLED).",
		}, []string{"model", "type", "status"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "commandbus_execution_duration_seconds",
			Help:    "Time from an execution's creation to its terminal status, by model, type and status.",
			Buckets: []float64{.05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600, 21600, 86400},
		}, []string{"model", "type", "status"}),
		parked: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "commandbus_executions_parked_total",
			Help: "Executions moved to the troubleshooting queue (WAITING_FOR_TSQ), by model and type.",
		}, execution),
		steps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "commandbus_execution_steps_total",
			Help: "Step attempts that ended, by model, type, step and outcome (succeeded, failed, retried).",
		}, []string{"model", "type", "step", "outcome"}),
		stepDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "commandbus_execution_step_duration_seconds",
			Help:    "Step attempt latency, from its start to its outcome (a command step's includes waiting for the reply), by model, type and step.",
			Buckets: []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300},
		}, step),
		stepRetries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "commandbus_execution_step_retries_total",
			Help: "Step retries scheduled after a transient failure, by model, type and step.",
		}, step),
		compensation: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "commandbus_compensations_total",
			Help: "Compensation phases started (an execution began undoing its completed steps), by model and type.",
		}, execution),
		compSteps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "commandbus_compensation_steps_total",
			Help: "Compensating steps that ended, by model, type and result (compensated, failed).",
		}, []string{"model", "type", "result"}),
		rescued: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "commandbus_execution_lease_expiries_total",
			Help: "Executions taken over from a runner whose lease had expired (it died or stalled), by model and type.",
		}, execution),
		stepNames: map[[2]string]map[string]bool{},
	}
	if reg == nil {
		return m, nil
	}
	var errs []error
	for _, c := range []**prometheus.CounterVec{&m.started, &m.ended, &m.parked, &m.steps, &m.stepRetries, &m.compensation, &m.compSteps, &m.rescued} {
		errs = append(errs, share(reg, c))
	}
	for _, h := range []**prometheus.HistogramVec{&m.duration, &m.stepDuration} {
		errs = append(errs, share(reg, h))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return m, nil
}

// share registers *c with reg, or points *c at the collector registered there already.
func share[C prometheus.Collector](reg prometheus.Registerer, c *C) error {
	if err := reg.Register(*c); err != nil {
		var already prometheus.AlreadyRegisteredError
		if errors.As(err, &already) {
			if existing, ok := already.ExistingCollector.(C); ok {
				*c = existing
				return nil
			}
		}
		return err
	}
	return nil
}

var _ execution.Metrics = (*executionMetrics)(nil)

// Checkpointed counts what one committed checkpoint did.
func (m *executionMetrics) Checkpointed(prev driver.ExecutionStatus, row *driver.ExecutionRow, entries []*driver.ExecutionLogEntry, started bool, now time.Time) {
	model, typ := row.Model, row.Type
	if started {
		m.started.WithLabelValues(model, typ).Inc()
	}
	for _, e := range entries {
		switch e.EntryType {
		case "STEP":
			outcome := ""
			switch e.StepStatus {
			case "COMPLETED":
				outcome = "succeeded"
			case "FAILED", "REPLY_FAILED":
				outcome = "failed"
			case "RETRY_SCHEDULED", "WAITING_RETRY":
				outcome = "retried"
			}
			if outcome == "" {
				continue
			}
			step := m.stepLabel(model, typ, e.Name)
			m.steps.WithLabelValues(model, typ, step, outcome).Inc()
			if outcome == "retried" {
				m.stepRetries.WithLabelValues(model, typ, step).Inc()
			}
			if e.StartedAt != nil {
				at := e.At
				if at.IsZero() {
					at = now
				}
				m.stepDuration.WithLabelValues(model, typ, step).Observe(max(0, at.Sub(*e.StartedAt).Seconds()))
			}
		case "COMPENSATION":
			switch e.StepStatus {
			case "COMPLETED", "COMPENSATION_SUCCESS":
				m.compSteps.WithLabelValues(model, typ, "compensated").Inc()
			case "FAILED", "COMPENSATION_FAILED":
				m.compSteps.WithLabelValues(model, typ, "failed").Inc()
			}
		case driver.LogEntryLifecycle:
			if e.StepStatus == string(driver.ExecutionCompensating) {
				m.compensation.WithLabelValues(model, typ).Inc()
			}
		}
	}
	if prev == row.Status {
		return
	}
	switch {
	case row.Status.Terminal() && !prev.Terminal():
		status := string(row.Status)
		m.ended.WithLabelValues(model, typ, status).Inc()
		if !row.CreatedAt.IsZero() {
			m.duration.WithLabelValues(model, typ, status).Observe(max(0, now.Sub(row.CreatedAt).Seconds()))
		}
	case row.Status == driver.ExecutionWaitingForTSQ:
		m.parked.WithLabelValues(model, typ).Inc()
	}
}

// Rescued counts an execution taken over from an expired lease.
func (m *executionMetrics) Rescued(row *driver.ExecutionRow) {
	m.rescued.WithLabelValues(row.Model, row.Type).Inc()
}

// stepLabel is step as a label: itself for the first maxStepLabels steps of (model, typ), then
// "other".
func (m *executionMetrics) stepLabel(model, typ, step string) string {
	if step == "" {
		return otherStep
	}
	key := [2]string{model, typ}
	m.mu.Lock()
	defer m.mu.Unlock()
	names := m.stepNames[key]
	if names == nil {
		names = map[string]bool{}
		m.stepNames[key] = names
	}
	if names[step] {
		return step
	}
	if len(names) >= maxStepLabels || strings.TrimSpace(step) == "" {
		return otherStep
	}
	names[step] = true
	return step
}
