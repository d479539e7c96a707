package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/examples/payments"
	"github.com/commandbus/commandbus/internal/dbtest"
	"github.com/commandbus/commandbus/internal/servertest"
	"github.com/commandbus/commandbus/transport/amqp"
)

// maxSeriesAfterBatch is the documented cardinality budget (README, "Metrics"): the most series
// /metrics may expose after the payments fixture ran a batch of each payment process. The series
// grow with the registered types, steps, domains and queues, never with the work done; the
// budget leaves room for new steps, not for a label that carries an id.
const maxSeriesAfterBatch = 1200

// Dashboard and alert metrics that a scrape of this fixture cannot show, since they need a broker,
// an outbox relay or a lost lease: the test checks that each is registered (or, for the broker
// dead-letter depth, that the transport's collector describes it) instead.
var onlyWithBrokersOrFailures = map[string]string{
	"commandbus_outbox_oldest_unpublished_seconds":   "the outbox relay runs only with a broker",
	"commandbus_outbox_backlog":                      "the outbox relay runs only with a broker",
	"commandbus_outbox_publish_latency_ms":           "published messages need a broker",
	"commandbus_inbox_dedupe_hits_total":             "duplicates arrive through a broker",
	"commandbus_transport_broker_dead_letters_total": "backed-out messages need a broker",
	"commandbus_transport_dead_letter_depth":         "the AMQP transport's collector",
	"commandbus_command_lease_expiries_total":        "a handler must lose its lease",
	"commandbus_execution_lease_expiries_total":      "a runner must lose its lease",
	"commandbus_execution_step_retries_total":        "an in-process step must fail transiently",
}

// Metrics the horizon query reports on PostgreSQL only (SQLite has no transaction horizon).
var postgresOnly = map[string]bool{
	"commandbus_database_oldest_transaction_seconds": true,
	"commandbus_outbox_horizon_held_messages":        true,
}

// sample is one series of a scrape.
type sample struct {
	name   string
	labels map[string]string
	value  float64
}

var (
	sampleLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)`)
	labelPair  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)
	uuidLike   = regexp.MustCompile(`(?i)[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	longNumber = regexp.MustCompile(`\d{6,}`)
)

// scrape reads /metrics as Prometheus does and returns its series and the type of each family.
func scrape(t *testing.T, f *consoleFixture) ([]sample, map[string]string) {
	t.Helper()
	x := send(t, "GET", f.HTTP.URL+"/metrics", nil, bearer(viewerToken))
	require.Equal(t, 200, x.resp.StatusCode, "%s", x.respBody)
	var samples []sample
	types := map[string]string{}
	for _, line := range strings.Split(string(x.respBody), "\n") {
		if rest, ok := strings.CutPrefix(line, "# TYPE "); ok {
			name, typ, _ := strings.Cut(rest, " ")
			types[name] = typ
			continue
		}
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		m := sampleLine.FindStringSubmatch(line)
		require.NotNil(t, m, "a sample line: %q", line)
		value, err := strconv.ParseFloat(m[3], 64)
		require.NoError(t, err, line)
		labels := map[string]string{}
		for _, pair := range labelPair.FindAllStringSubmatch(m[2], -1) {
			labels[pair[1]] = pair[2]
		}
		samples = append(samples, sample{name: m[1], labels: labels, value: value})
	}
	return samples, types
}

// family is the metric family a series belongs to (a histogram's _bucket, _sum and _count
// belong to the histogram).
func family(name string, types map[string]string) string {
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok && (types[base] == "histogram" || types[base] == "summary" || suffix == "_bucket") {
			return base
		}
	}
	return name
}

// sum adds the values of the series of name whose labels include want.
func sum(samples []sample, name string, want map[string]string) float64 {
	total := 0.0
next:
	for _, s := range samples {
		if s.name != name {
			continue
		}
		for k, v := range want {
			if s.labels[k] != v {
				continue next
			}
		}
		total += s.value
	}
	return total
}

// TestMetricsAfterAPaymentsBatch runs a batch of each payment process (and parks one payment
// in the TSQ), then scrapes /metrics: the execution, step, queue and TSQ metrics count what
// happened, no label carries an id, the series stay within the documented budget, and every
// metric the Grafana dashboard and the alert rules query exists.
func TestMetricsAfterAPaymentsBatch(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		f := setupConsole(t, drv)
		ctx := context.Background()
		const perType = 2
		types := []string{payments.TypePaymentStep, payments.TypePaymentManager, payments.TypePaymentSaga}
		var batches []*payments.BatchView
		for _, typ := range types {
			b, err := f.Platform.CreateBatch(ctx, perType, servertest.Today, typ, nil)
			require.NoError(t, err)
			batches = append(batches, b)
		}
		// A saga payment the network rejects for a business rule: its saga compensates.
		rejected, err := f.Platform.CreateBatch(ctx, 1, servertest.Today, payments.TypePaymentSaga, &payments.Behavior{Name: "rejected",
			Steps: map[string]payments.StepBehavior{payments.StepSubmitPayment: {FailBusinessRulePct: 100}}})
		require.NoError(t, err)
		batches = append(batches, rejected)
		for _, b := range batches {
			servertest.Eventually(t, 120*time.Second, "batch "+b.ProcessType+" to end", func() bool {
				v, err := f.Platform.GetBatch(ctx, b.ID)
				require.NoError(t, err)
				return v.Counts.Terminal() == v.Total && v.Total > 0
			})
		}
		parked := f.ParkManagerPayment()

		var samples []sample
		var familyTypes map[string]string
		// The engine counts after each commit, the database gauges are read at the scrape and
		// the command DLQ gauge is refreshed every 10s: poll until all have seen the last commits.
		servertest.Eventually(t, 30*time.Second, "the scrape to count the batch", func() bool {
			samples, familyTypes = scrape(t, f)
			return sum(samples, "commandbus_execution_tsq_depth", map[string]string{"type": payments.TypePaymentManager}) == 1 &&
				sum(samples, "commandbus_executions_ended_total", nil) >= float64(len(types)*perType+1) &&
				sum(samples, "commandbus_dlq_depth", nil) == 1 &&
				sum(samples, "commandbus_executions_parked_total", map[string]string{"type": payments.TypePaymentManager}) == 1
		})

		// What the batch did.
		for _, typ := range types {
			require.GreaterOrEqual(t, sum(samples, "commandbus_executions_started_total", map[string]string{"type": typ}), float64(perType), typ)
			require.GreaterOrEqual(t, sum(samples, "commandbus_executions_ended_total", map[string]string{"type": typ}), float64(perType), typ)
			require.GreaterOrEqual(t, sum(samples, "commandbus_execution_duration_seconds_count", map[string]string{"type": typ}), float64(perType), typ)
			require.Positive(t, sum(samples, "commandbus_execution_steps_total", map[string]string{"type": typ, "outcome": "succeeded"}), typ)
		}
		require.Positive(t, sum(samples, "commandbus_execution_step_duration_seconds_count", map[string]string{"type": payments.TypePaymentStep}))
		require.Equal(t, 1.0, sum(samples, "commandbus_compensations_total", map[string]string{"type": payments.TypePaymentSaga}), "the rejected saga payment")
		require.Equal(t, 1.0, sum(samples, "commandbus_executions_ended_total", map[string]string{"type": payments.TypePaymentSaga, "status": "COMPENSATED"}))
		require.Positive(t, sum(samples, "commandbus_compensation_steps_total", map[string]string{"type": payments.TypePaymentSaga, "result": "compensated"}))
		require.Equal(t, 1.0, sum(samples, "commandbus_executions_parked_total", map[string]string{"type": payments.TypePaymentManager}))
		require.Equal(t, 1.0, sum(samples, "commandbus_executions_active", map[string]string{"type": payments.TypePaymentManager, "status": "WAITING_FOR_TSQ"}))
		row, err := f.Client.Driver().Executor().ExecutionGet(ctx, parked.ExecutionID)
		require.NoError(t, err)
		require.Equal(t, driver.ExecutionWaitingForTSQ, row.Status, "the gauge counts the execution the database holds in the TSQ")
		require.Positive(t, sum(samples, "commandbus_commands_claimed_total", nil))
		require.Equal(t, 0.0, sum(samples, "commandbus_execution_lease_expiries_total", nil), "no runner lost its lease")
		queues := 0
		for _, s := range samples {
			if s.name == "commandbus_queue_oldest_ready_seconds" {
				queues++
				require.GreaterOrEqual(t, s.value, 0.0)
			}
		}
		require.Positive(t, queues, "the queue gauges report the queues holding unfinished commands")
		if drv.Name() == "postgres" {
			require.Contains(t, familyTypes, "commandbus_database_oldest_transaction_seconds")
		}

		// No label carries an id, and the series stay within the budget.
		for _, s := range samples {
			for k, v := range s.labels {
				require.NotContains(t, []string{"id", "execution_id", "command_id", "correlation_id", "payment_id", "business_key", "tenant_id"}, k,
					"%s carries an id label", s.name)
				require.False(t, uuidLike.MatchString(v) || longNumber.MatchString(v), "%s{%s=%q} carries an id", s.name, k, v)
			}
		}
		t.Logf("%s: %d series in %d families after the batch (budget %d)", drv.Name(), len(samples), len(familyTypes), maxSeriesAfterBatch)
		require.LessOrEqual(t, len(samples), maxSeriesAfterBatch, "series after a batch; see the README's cardinality note")

		// Every metric the dashboard and the alerts query exists in the scrape (or is registered,
		// for those that need a broker or a failure), and the README's table names every one.
		readme, err := os.ReadFile("../README.md")
		require.NoError(t, err)
		scraped := map[string]bool{}
		for _, s := range samples {
			name := family(s.name, familyTypes)
			scraped[name] = true
			require.Contains(t, string(readme), "`"+name+"`", "the README's metrics table lists %s", name)
		}
		for _, name := range deployedMetrics(t) {
			base := family(name, familyTypes)
			if scraped[base] {
				continue
			}
			if postgresOnly[base] && drv.Name() != "postgres" {
				continue
			}
			reason, conditional := onlyWithBrokersOrFailures[base]
			require.True(t, conditional, "%s is queried by deploy/ but absent from a scrape after a batch", name)
			require.True(t, registered(t, f.Registry, base), "%s (%s) is not registered", base, reason)
		}
	})
}

// deployRoot is the repository's deploy directory.
const deployRoot = "../deploy"

var metricName = regexp.MustCompile(`\bcommandbus_[a-z0-9_]+\b`)

// dashboardExprs returns the PromQL of every panel target of the Grafana dashboard.
func dashboardExprs(t *testing.T) []string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(deployRoot, "grafana", "commandbus.json"))
	require.NoError(t, err)
	var doc any
	require.NoError(t, json.Unmarshal(raw, &doc), "the dashboard is JSON")
	var exprs []string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if e, ok := v["expr"].(string); ok {
				exprs = append(exprs, e)
			}
			for _, child := range v {
				walk(child)
			}
		case []any:
			for _, child := range v {
				walk(child)
			}
		}
	}
	walk(doc)
	require.NotEmpty(t, exprs)
	return exprs
}

// alertRules reads the alert rules file.
type alertRules struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert string `yaml:"alert"`
			Expr  string `yaml:"expr"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

func alertExprs(t *testing.T) []string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(deployRoot, "prometheus", "alerts.yaml"))
	require.NoError(t, err)
	var rules alertRules
	require.NoError(t, yaml.Unmarshal(raw, &rules))
	var exprs []string
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			require.NotEmpty(t, r.Alert)
			exprs = append(exprs, r.Expr)
		}
	}
	require.NotEmpty(t, exprs)
	return exprs
}

// deployedMetrics lists the metric names the dashboard and the alert rules query.
func deployedMetrics(t *testing.T) []string {
	t.Helper()
	seen := map[string]bool{}
	for _, e := range append(dashboardExprs(t), alertExprs(t)...) {
		for _, name := range metricName.FindAllString(e, -1) {
			seen[name] = true
		}
	}
	names := make([]string, 0, len(seen))
	for name := range seen {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// probe is a collector of one description, used to ask a registry whether a name is taken.
type descProbe struct{ desc *prometheus.Desc }

func (p descProbe) Describe(ch chan<- *prometheus.Desc) { ch <- p.desc }
func (p descProbe) Collect(chan<- prometheus.Metric)    {}

// registered reports whether reg holds a collector describing name, or, for the broker
// dead-letter depth, whether the AMQP transport's collector describes it.
func registered(t *testing.T, reg *prometheus.Registry, name string) bool {
	t.Helper()
	if name == "commandbus_transport_dead_letter_depth" {
		ch := make(chan *prometheus.Desc, 4)
		amqp.DeadLetterCollector("", amqp.Topology{}).Describe(ch)
		close(ch)
		for d := range ch {
			if strings.Contains(d.String(), `"`+name+`"`) {
				return true
			}
		}
		return false
	}
	p := descProbe{prometheus.NewDesc(name, "probe", nil, nil)}
	if err := reg.Register(p); err != nil {
		return true // the name is taken (with other labels or help, or the same)
	}
	reg.Unregister(p)
	return false
}

// promtool returns promtool's path, or skips (fails under COMMANDBUS_REQUIRE_PROMTOOL=1).
func promtool(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("COMMANDBUS_REQUIRE_PROMTOOL") == "1" {
			t.Fatal("promtool is required (COMMANDBUS_REQUIRE_PROMTOOL=1): apt-get install prometheus")
		}
		t.Skip("promtool not installed (Debian package prometheus); set COMMANDBUS_REQUIRE_PROMTOOL=1 to require it")
	}
	return path
}

// TestAlertRulesPassPromtool checks deploy/prometheus/alerts.yaml with promtool check rules, then
// runs its unit tests (alerts_test.yaml: each alert fires on the series of its failure, with its
// labels and text, and stays quiet on healthy series).
func TestAlertRulesPassPromtool(t *testing.T) {
	t.Parallel()
	tool := promtool(t)
	out, err := exec.Command(tool, "check", "rules", filepath.Join(deployRoot, "prometheus", "alerts.yaml")).CombinedOutput()
	require.NoError(t, err, "promtool check rules:\n%s", out)
	require.Contains(t, string(out), "SUCCESS")
	out, err = exec.Command(tool, "test", "rules", filepath.Join(deployRoot, "prometheus", "alerts_test.yaml")).CombinedOutput()
	require.NoError(t, err, "promtool test rules:\n%s", out)
	require.Contains(t, string(out), "SUCCESS")
	// Every alert has a unit test.
	raw, err := os.ReadFile(filepath.Join(deployRoot, "prometheus", "alerts_test.yaml"))
	require.NoError(t, err)
	raw2, err := os.ReadFile(filepath.Join(deployRoot, "prometheus", "alerts.yaml"))
	require.NoError(t, err)
	var rules alertRules
	require.NoError(t, yaml.Unmarshal(raw2, &rules))
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			require.Contains(t, string(raw), "alertname: "+r.Alert+"\n", "alerts_test.yaml tests %s", r.Alert)
		}
	}
}

// TestDashboardQueriesParse checks that every query of the Grafana dashboard is valid PromQL: with
// Grafana's variables replaced, each becomes a recording rule that promtool checks.
func TestDashboardQueriesParse(t *testing.T) {
	t.Parallel()
	tool := promtool(t)
	grafanaVariables := strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m", "$job", ".*")
	var b strings.Builder
	b.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	for i, e := range dashboardExprs(t) {
		q, err := json.Marshal(grafanaVariables.Replace(e)) // a JSON string is a YAML string
		require.NoError(t, err)
		fmt.Fprintf(&b, "      - record: dashboard:query_%d\n        expr: %s\n", i, q)
	}
	path := filepath.Join(t.TempDir(), "dashboard-rules.yaml")
	require.NoError(t, os.WriteFile(path, []byte(b.String()), 0o600))
	out, err := exec.Command(tool, "check", "rules", path).CombinedOutput()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		t.Fatalf("a dashboard query is not valid PromQL:\n%s", out)
	}
	require.NoError(t, err)
}
