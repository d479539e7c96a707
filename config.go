package commandbus

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/commandbus/commandbus/internal/clock"
)

// Config configures a Client. Its YAML form (read by package config, which adds a deployment's
// keys: database, server, ...) is shaped as a Spring-style application.yml: features, domains and
// command-steps, plus the process pollers, the brokers and the outbox. Every field has a
// documented default applied by WithDefaults; a zero value (including an explicit 0 in a file)
// means "use the default".
type Config struct {
	// Features switches whole capabilities of this instance on or off.
	Features Features `yaml:"features"`
	// Domains holds per-domain settings, keyed by domain name. A domain with handlers registered
	// but no entry here runs with DomainConfig's defaults.
	Domains map[string]*DomainConfig `yaml:"domains"`
	// CommandSteps maps process command steps to a target domain, command type and timeout.
	CommandSteps map[string]*CommandStepConfig `yaml:"command-steps"`
	// Process configures the execution pollers and per-process-type overrides.
	Process ProcessConfig `yaml:"process"`
	// AMQP is the command broker of domains whose transport is amqp (the role an IBM MQ queue manager plays).
	AMQP AMQPConfig `yaml:"amqp"`
	// AMQP10 is the AMQP 1.0 broker of the domains whose transport is amqp10 (transport/amqp10).
	AMQP10 AMQPConfig `yaml:"amqp10"`
	// Kafka is the event log of domains whose events go to kafka.
	Kafka KafkaConfig `yaml:"kafka"`
	// Events is where every domain's command outcomes are published as events, unless the domain
	// says otherwise: "" or "none" (no events) or "kafka". Default: none.
	Events string `yaml:"events"`
	// LifecycleEvents is where the lifecycle events of every execution (started, step
	// succeeded, completed, ...) are published through the outbox, keyed by execution: "" or
	// "none" (none derived), "kafka" (the topic LifecycleEventsTopic; needs kafka.brokers),
	// "amqp" (RabbitMQ's queue, or exchange, LifecycleEventsTopic; needs amqp.url), "amqp10"
	// (the AMQP 1.0 queue LifecycleEventsTopic; needs amqp10.url) or "webhook" (POSTed, signed,
	// to the endpoint of Webhooks named by LifecycleEventsTopic). Default: none. A runtime's
	// orchestration.Config.Events takes precedence.
	LifecycleEvents string `yaml:"lifecycle-events"`
	// LifecycleEventsTopic is the Kafka topic, the AMQP queue or exchange, or the webhook
	// endpoint's name the lifecycle events go to. Default: events.Orchestrations (webhook: the
	// only endpoint of Webhooks, when there is one).
	LifecycleEventsTopic string `yaml:"lifecycle-events-topic"`
	// LifecycleEventsExchange (amqp only) publishes the lifecycle events to the durable topic
	// exchange LifecycleEventsTopic, routed by event type (EXECUTION_COMPLETED, ...), instead of
	// to the queue of that name: bind queues to it to fan the events out. Default: false.
	LifecycleEventsExchange bool `yaml:"lifecycle-events-exchange"`
	// Webhooks are the signed HTTP endpoints lifecycle events (lifecycle-events: webhook) and
	// webhook callbacks are POSTed to, through the outbox.
	Webhooks WebhooksConfig `yaml:"webhooks"`
	// Outbox configures the relay that publishes brokered messages.
	Outbox OutboxConfig `yaml:"outbox"`
	// WatchdogInterval is how often the watchdog looks for commands of brokered domains whose
	// lease expired or whose deadline passed, and for commands of worked queues whose lease
	// expired on their last attempt (timed out then, not claimed again). Default: 5s.
	WatchdogInterval Duration `yaml:"watchdog-interval"`

	// FetchCooldown is the least time between two claims of one queue, so that freed slots are
	// claimed in batches rather than one by one. Default: 5ms.
	FetchCooldown Duration `yaml:"fetch-cooldown"`
	// FetchPollInterval is how often a queue is claimed when no notification arrives; the
	// fallback that always works. Default: 1s.
	FetchPollInterval Duration `yaml:"fetch-poll-interval"`
	// ShutdownTimeout bounds graceful shutdown when Stop's context has no deadline. Default: 30s.
	ShutdownTimeout Duration `yaml:"shutdown-timeout"`

	// Handlers are the command and reply handlers this instance runs. Required to work commands;
	// a Client without handlers can still send and query.
	Handlers *Handlers `yaml:"-"`
	// Logger receives structured logs with command, domain and correlation ids. Default: logs at
	// warn level and above to stderr.
	Logger *slog.Logger `yaml:"-"`
	// WorkerID names this instance in claims and audit entries. Default: hostname-pid-random.
	WorkerID string `yaml:"-"`
	// MetricsRegisterer receives the Prometheus collectors. Default: none are registered.
	MetricsRegisterer prometheus.Registerer `yaml:"-"`
	// Clock is injected by tests and simulations; nil uses the database clock for every
	// visibility decision and the wall clock elsewhere.
	Clock clock.Clock `yaml:"-"`
	// Rand draws retry jitter. Default: a randomly seeded source.
	Rand *rand.Rand `yaml:"-"`
	// TracerProvider creates the OpenTelemetry spans of sends, claims, handlers, replies, the
	// outbox relay, the inbox and every execution's runs, steps and checkpoints (package tracing).
	// Default: the global provider (otel.GetTracerProvider), a no-op until one is set.
	TracerProvider trace.TracerProvider `yaml:"-"`
	// ExecutionObserver, when set, is told about every execution commit of this instance after
	// it committed (see ExecutionObserver). Default: none.
	ExecutionObserver ExecutionObserver `yaml:"-"`
}

// Features are the global capabilities of an instance: which roles it runs.
type Features struct {
	// CommandHandlers runs command handlers of enabled domains. Default: true.
	CommandHandlers *bool `yaml:"command-handlers"`
	// ProcessExecution runs process executions and their pollers. Default: true.
	ProcessExecution *bool `yaml:"process-execution"`
	// ReplyProcessing runs reply handlers of enabled domains. Default: true.
	ReplyProcessing *bool `yaml:"reply-processing"`
}

// DomainConfig is one domain's settings. The concurrency of a domain across a deployment is
// replicas × ConcurrentMessages.
type DomainConfig struct {
	// Enabled runs this domain's handlers on this instance. Default: true.
	Enabled *bool `yaml:"enabled"`
	// ConcurrentMessages is how many commands of the domain one instance handles at once.
	// Default: 5.
	ConcurrentMessages int `yaml:"concurrent-messages"`
	// ReplyConcurrentMessages is how many replies of the domain's reply queue one instance
	// handles at once. Default: ConcurrentMessages.
	ReplyConcurrentMessages int `yaml:"reply-concurrent-messages"`
	// VisibilityTimeout is the lease of a claimed command: a handler still running after it loses
	// the command to another worker and cannot complete it. Default: 30s.
	VisibilityTimeout Duration `yaml:"visibility-timeout"`
	// MaxAttempts is how many times a command is tried before it goes to the troubleshooting
	// queue, unless the sender sets its own. Default: 3.
	MaxAttempts int `yaml:"max-attempts"`
	// Retry is the backoff between attempts.
	Retry RetryPolicy `yaml:"retry"`
	// FetchBatch is the most commands claimed in one query. Default: 100.
	FetchBatch int `yaml:"fetch-batch"`
	// Transport carries the domain's commands: "postgres" (the command table is the queue) or
	// "amqp" (the command and an outbox row commit together; the relay publishes the command to
	// APP.CMD.<DOMAIN>.<Type>.Q; replies go to APP.CMD.REPLY.Q), or "amqp10" (the same over AMQP
	// 1.0, configured by amqp10: IBM MQ's AMQP channel, Azure Service Bus, Artemis, RabbitMQ).
	// Default: postgres.
	Transport string `yaml:"transport"`
	// Events overrides the client's Events for this domain: "none" or "kafka". Default: the
	// client's.
	Events string `yaml:"events"`
	// MaxRetryWindow parks a command in the troubleshooting queue (the dead-letter queue) instead of
	// retrying it when the next attempt would start later than this long after the command was
	// sent, however many attempts remain. Default: 0, no window (only MaxAttempts bounds retries).
	MaxRetryWindow Duration `yaml:"max-retry-window"`
}

// The transports of a domain's commands.
const (
	TransportPostgres = "postgres"
	TransportAMQP     = "amqp"
	TransportAMQP10   = "amqp10"
)

// The event destinations. Domain events go to none or kafka; lifecycle events to any.
const (
	EventsNone    = "none"
	EventsKafka   = "kafka"
	EventsAMQP    = "amqp"
	EventsAMQP10  = "amqp10"
	EventsWebhook = "webhook"
)

// WebhooksConfig are the webhook endpoints of an instance and how their deliveries are retried.
type WebhooksConfig struct {
	// Endpoints by name (the name callbacks and lifecycle-events-topic refer to).
	Endpoints map[string]*WebhookEndpointConfig `yaml:"endpoints"`
	// MaxAttempts is how many failed deliveries make a message FAILED (a dead letter, listed
	// and resendable in the console); the outbox relay's backoff spaces the attempts.
	// Default: 8 (outbox.DefaultWebhookMaxAttempts).
	MaxAttempts int `yaml:"max-attempts"`
}

// WebhookEndpointConfig is one webhook endpoint.
type WebhookEndpointConfig struct {
	// URL receives the POST (http or https). Required.
	URL string `yaml:"url"`
	// Secret keys the HMAC-SHA256 signature of each request (X-Commandbus-Signature). Required.
	Secret string `yaml:"secret"`
	// Timeout bounds one delivery; a delivery that times out is retried. Default: 10s.
	Timeout Duration `yaml:"timeout"`
}

// AMQPConfig is an AMQP broker: the amqp section is the AMQP 0-9-1 broker (RabbitMQ), the amqp10
// section the AMQP 1.0 one (IBM MQ through its AMQP channel, Azure Service Bus, Artemis, RabbitMQ).
type AMQPConfig struct {
	// URL is the broker, as amqp://user:password@host:5672/vhost (amqps:// for TLS). Required when
	// a domain's transport is amqp (amqp10 for the amqp10 section).
	URL string `yaml:"url"`
	// Prefix starts every queue name: <prefix>.CMD.<DOMAIN>.<Type>.Q, <prefix>.CMD.REPLY.Q,
	// <prefix>.DLQ, <prefix>.PARKED.Q. Default: APP.
	Prefix string `yaml:"prefix"`
	// BackoutThreshold is how many times a message may be delivered without being processed;
	// after that it moves to its queue's backout queue, <queue>.BACKOUT, and its command is
	// parked in the troubleshooting queue (IBM MQ's BOTHRESH and BOQNAME). Default: 5.
	BackoutThreshold int `yaml:"backout-threshold"`
	// EventQueues lists, comma-separated, the queues inbound events arrive on (the amqp section
	// only): each event starts the definitions its type triggers (transport/amqp EventConsumer).
	// Default: none.
	EventQueues string `yaml:"event-queues"`
}

// EventQueueList returns EventQueues split at commas.
func (a AMQPConfig) EventQueueList() []string { return splitList(a.EventQueues) }

// KafkaConfig is the Kafka cluster events go to.
type KafkaConfig struct {
	// Brokers lists seed brokers, comma-separated (host1:9092,host2:9092). Required when events go
	// to kafka.
	Brokers string `yaml:"brokers"`
	// TopicPrefix starts every event topic: <prefix><BoundedContext>. Default: "events.".
	TopicPrefix string `yaml:"topic-prefix"`
	// EventTopics lists, comma-separated, the topics inbound events arrive on: each event starts
	// the definitions its type triggers (transport/kafka EventConsumer); a malformed one goes to
	// <topic>.DLQ. Default: none.
	EventTopics string `yaml:"event-topics"`
	// EventGroup is the consumer group the instances consume the event topics in.
	// Default: commandbus-events.
	EventGroup string `yaml:"event-group"`
}

// BrokerList returns Brokers split at commas.
func (k KafkaConfig) BrokerList() []string { return splitList(k.Brokers) }

// EventTopicList returns EventTopics split at commas.
func (k KafkaConfig) EventTopicList() []string { return splitList(k.EventTopics) }

// splitList splits a comma-separated list, dropping blanks.
func splitList(list string) []string {
	var out []string
	for _, b := range strings.Split(list, ",") {
		if b = strings.TrimSpace(b); b != "" {
			out = append(out, b)
		}
	}
	return out
}

// OutboxConfig configures the outbox relay and retention.
type OutboxConfig struct {
	// BatchSize is the most messages the relay publishes at once. Default: 500.
	BatchSize int `yaml:"batch-size"`
	// PollInterval is the sweeper's interval: how often the relay looks for messages without a
	// wake-up. Default: 1s.
	PollInterval Duration `yaml:"poll-interval"`
	// MaxBackoff caps the delay between attempts to publish one message. Default: 1m.
	MaxBackoff Duration `yaml:"max-backoff"`
	// Retention is how long published outbox rows and inbox entries are kept. Default: 24h.
	Retention Duration `yaml:"retention"`
	// MaxLag, when positive, paces the orchestration runtime by the relay: checkpoints that write
	// outbox messages (lifecycle events, commands for a broker) wait, up to 4 × MaxLag each,
	// while the relay lags more than MaxLag (see orchestration.Runtime.PaceEvents). Under a load
	// the CPU cannot carry, messages then wait about MaxLag instead of a growing backlog, and the
	// executions slow down. A relay whose publications fail holds nobody back. Default: 0, off
	// (a remote broker's round trip alone can keep the relay behind); 10ms suits a broker beside
	// the relay.
	MaxLag Duration `yaml:"max-lag"`
	// Handoff hands the outbox messages the orchestration runtime writes (lifecycle events,
	// commands for a broker) to this instance's relay right after each commit: written leased to
	// it, they are published from memory, without waiting for a claim (see
	// orchestration.Runtime.HandOffOutbox). Default: true.
	Handoff *bool `yaml:"handoff"`
}

// RetryPolicy is exponential backoff with a cap and optional jitter: the delay after attempt n is
// InitialDelay × Multiplier^(n-1), capped at MaxDelay, then spread by ±Jitter.
type RetryPolicy struct {
	// InitialDelay is the delay after the first failed attempt. Default: 1s.
	InitialDelay Duration `yaml:"initial-delay"`
	// MaxDelay caps the delay. Default: 5m.
	MaxDelay Duration `yaml:"max-delay"`
	// Multiplier grows the delay per attempt. Default: 2.
	Multiplier float64 `yaml:"multiplier"`
	// Jitter spreads each delay by up to ± this fraction (0 to 1). Default: 0.2.
	Jitter *float64 `yaml:"jitter"`
}

// CommandStepConfig maps a process command step to the command it sends. The
// reference processes look their steps up by name (CommandStepOr), so an entry changes where a
// running process sends the step's command and how long it waits for the reply.
type CommandStepConfig struct {
	// Domain receives the command. Default: the domain the process's code names for the step.
	Domain string `yaml:"domain"`
	// CommandType is the command's type. Default: the type the process's code names.
	CommandType string `yaml:"command-type"`
	// Timeout is how long the process waits for the reply before the wait times out. Default:
	// the longer of DefaultCommandStepTimeout (2m) and the target domain's RedeliveryWindow, so
	// that a command whose worker died is redelivered and answered before the process stops
	// waiting. A shorter timeout turns a killed worker into a WAIT_TIMEOUT for an operator.
	Timeout Duration `yaml:"timeout"`
}

// CommandStep returns the command-steps entry of a step: the entry named name, or else the one
// whose name equals it ignoring case and treating '-' and '_' alike (an entry created from an
// environment variable, such as COMMANDBUS_COMMAND_STEPS_BOOKFX_TIMEOUT, is named bookfx). It
// returns nil when there is none.
func (c *Config) CommandStep(name string) *CommandStepConfig {
	return lookupNormalized(c.CommandSteps, name)
}

// CommandStepOr returns the command a process's step sends: the command-steps entry of name
// (see CommandStep) where it sets a field, the given domain and command type otherwise, and
// the default timeout (see CommandStepConfig.Timeout) when neither sets one.
func (c *Config) CommandStepOr(name, domain, commandType string) CommandStepConfig {
	out := CommandStepConfig{Domain: domain, CommandType: commandType}
	if s := c.CommandStep(name); s != nil {
		if s.Domain != "" {
			out.Domain = s.Domain
		}
		if s.CommandType != "" {
			out.CommandType = s.CommandType
		}
		out.Timeout = s.Timeout
	}
	if out.Timeout <= 0 {
		out.Timeout = Duration(c.defaultStepTimeout(out.Domain))
	}
	return out
}

// defaultStepTimeout is the reply timeout of a step to domain when none is configured.
func (c *Config) defaultStepTimeout(domain string) time.Duration {
	return max(DefaultCommandStepTimeout, c.Domain(domain).RedeliveryWindow())
}

// ProcessType returns the overrides of a process type, found as CommandStep finds a step, or
// nil.
func (c *Config) ProcessType(name string) *ProcessTypeConfig {
	return lookupNormalized(c.Process.Types, name)
}

// lookupNormalized finds the entry of m named name, or else the one whose name equals it in the
// form normalizeEnvName gives.
func lookupNormalized[V any](m map[string]*V, name string) *V {
	if v, ok := m[name]; ok && v != nil {
		return v
	}
	norm := normalizeEnvName(name)
	for _, key := range sortedKeys(m) {
		if v := m[key]; v != nil && normalizeEnvName(key) == norm {
			return v
		}
	}
	return nil
}

// normalizeEnvName is the form entry names are compared in: lower case, '-' as '_'. It is the
// name package config gives an entry it creates from an environment variable.
func normalizeEnvName(name string) string {
	return strings.ToLower(strings.ReplaceAll(name, "-", "_"))
}

// ProcessConfig configures process execution (the commandbus.process keys).
type ProcessConfig struct {
	// PendingPollInterval polls for PENDING executions when no notification arrives. Default: 1s.
	PendingPollInterval Duration `yaml:"pending-poll-interval"`
	// RetryPollInterval polls for executions due for retry. Default: 5s.
	RetryPollInterval Duration `yaml:"retry-poll-interval"`
	// TimeoutCheckInterval checks expired waits. Default: 60s.
	TimeoutCheckInterval Duration `yaml:"timeout-check-interval"`
	// DeadlineCheckInterval checks exceeded deadlines. Default: 60s.
	DeadlineCheckInterval Duration `yaml:"deadline-check-interval"`
	// DefaultWaitTimeout applies to waits without their own timeout. Default: 1h.
	DefaultWaitTimeout Duration `yaml:"default-wait-timeout"`
	// ExecutionLease is how long a runner owns an execution before another may take it over.
	// Default: 30s.
	ExecutionLease Duration `yaml:"execution-lease"`
	// ConcurrentExecutions is how many executions one instance runs at once. Default: 50.
	ConcurrentExecutions int `yaml:"concurrent-executions"`
	// LogCache is how many waiting executions' logs one instance keeps in memory, so that
	// resuming one reads only the log entries added since it let go. Default (0): 10,000; -1
	// turns the cache off.
	LogCache int `yaml:"log-cache"`
	// Retention is how long an ended execution (COMPLETED, COMPENSATED, CANCELLED, FAILED) is
	// kept after it ended. Older ones are deleted with their log, responses and search
	// attributes by the client's maintenance, in batches of 500 executions per transaction.
	// Default (0): executions are kept forever; deleting history is a choice to make.
	Retention Duration `yaml:"retention"`
	// RetentionInterval is how often the retention runs, when Retention is set. Default: 5m.
	RetentionInterval Duration `yaml:"retention-interval"`
	// Types holds overrides per process type. An entry may also be written directly under
	// process (process.PaymentStep.default-wait-timeout), unless its name is one
	// of the keys above; writing one type both ways is a problem.
	Types map[string]*ProcessTypeConfig `yaml:"types,remain"`
}

// ProcessTypeConfig overrides defaults for one process type.
type ProcessTypeConfig struct {
	// DefaultWaitTimeout overrides ProcessConfig.DefaultWaitTimeout.
	DefaultWaitTimeout Duration `yaml:"default-wait-timeout"`
	// DeadlineAction is TSQ, COMPENSATE or FAIL.
	DeadlineAction string `yaml:"deadline-action"`
}

// The defaults applied by WithDefaults, one per configuration key of the same name.
const (
	DefaultConcurrentMessages = 5
	DefaultVisibilityTimeout  = 30 * time.Second
	DefaultMaxAttempts        = 3
	DefaultFetchBatch         = 100
	DefaultRetryInitialDelay  = time.Second
	DefaultRetryMaxDelay      = 5 * time.Minute
	DefaultRetryMultiplier    = 2.0
	DefaultRetryJitter        = 0.2
	DefaultCommandStepTimeout = 2 * time.Minute // at least the default domain's RedeliveryWindow
	DefaultFetchCooldown      = 5 * time.Millisecond
	DefaultFetchPollInterval  = time.Second
	DefaultShutdownTimeout    = 30 * time.Second
	DefaultWatchdogInterval   = 5 * time.Second
)

func boolPtr(b bool) *bool { return &b }

func orDuration(d *Duration, def time.Duration) {
	if *d == 0 {
		*d = Duration(def)
	}
}

// WithDefaults returns a copy of c with every unset field at its default. Domain entries are
// copied so the caller's config is not changed.
func (c *Config) WithDefaults() *Config {
	out := *c
	if out.Features.CommandHandlers == nil {
		out.Features.CommandHandlers = boolPtr(true)
	}
	if out.Features.ProcessExecution == nil {
		out.Features.ProcessExecution = boolPtr(true)
	}
	if out.Features.ReplyProcessing == nil {
		out.Features.ReplyProcessing = boolPtr(true)
	}
	out.Domains = make(map[string]*DomainConfig, len(c.Domains))
	for name, d := range c.Domains {
		if d == nil {
			d = &DomainConfig{}
		}
		out.Domains[name] = d.withDefaults()
	}
	out.CommandSteps = make(map[string]*CommandStepConfig, len(c.CommandSteps))
	for name, s := range c.CommandSteps {
		if s == nil {
			s = &CommandStepConfig{}
		}
		step := *s
		orDuration(&step.Timeout, out.defaultStepTimeout(step.Domain))
		out.CommandSteps[name] = &step
	}
	p := &out.Process
	orDuration(&p.PendingPollInterval, time.Second)
	orDuration(&p.RetryPollInterval, 5*time.Second)
	orDuration(&p.TimeoutCheckInterval, time.Minute)
	orDuration(&p.DeadlineCheckInterval, time.Minute)
	orDuration(&p.DefaultWaitTimeout, time.Hour)
	orDuration(&p.ExecutionLease, 30*time.Second)
	orDuration(&p.RetentionInterval, 5*time.Minute)
	if p.ConcurrentExecutions == 0 {
		p.ConcurrentExecutions = 50
	}
	if out.AMQP.Prefix == "" {
		out.AMQP.Prefix = "APP"
	}
	if out.AMQP.BackoutThreshold == 0 {
		out.AMQP.BackoutThreshold = 5
	}
	if out.AMQP10.Prefix == "" {
		out.AMQP10.Prefix = "APP"
	}
	if out.AMQP10.BackoutThreshold == 0 {
		out.AMQP10.BackoutThreshold = 5
	}
	if out.Kafka.TopicPrefix == "" {
		out.Kafka.TopicPrefix = "events."
	}
	if out.Events == "" {
		out.Events = EventsNone
	}
	if out.LifecycleEvents == "" {
		out.LifecycleEvents = EventsNone
	}
	if out.Outbox.BatchSize == 0 {
		out.Outbox.BatchSize = 500
	}
	orDuration(&out.Outbox.PollInterval, time.Second)
	orDuration(&out.Outbox.MaxBackoff, time.Minute)
	orDuration(&out.Outbox.Retention, 24*time.Hour)
	if out.Outbox.Handoff == nil {
		out.Outbox.Handoff = boolPtr(true)
	}
	orDuration(&out.WatchdogInterval, DefaultWatchdogInterval)
	orDuration(&out.FetchCooldown, DefaultFetchCooldown)
	orDuration(&out.FetchPollInterval, DefaultFetchPollInterval)
	orDuration(&out.ShutdownTimeout, DefaultShutdownTimeout)
	if out.Handlers == nil {
		out.Handlers = NewHandlers()
	}
	if out.Logger == nil {
		out.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	if out.WorkerID == "" {
		out.WorkerID = defaultWorkerID()
	}
	if out.Clock == nil {
		out.Clock = clock.Real{}
	}
	if out.Rand == nil {
		out.Rand = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	return &out
}

// Domain returns the settings of a domain, with defaults when it has no entry.
func (c *Config) Domain(name string) *DomainConfig {
	if d, ok := c.Domains[name]; ok && d != nil {
		return d
	}
	return (&DomainConfig{}).withDefaults()
}

func (d *DomainConfig) withDefaults() *DomainConfig {
	out := *d
	if out.Enabled == nil {
		out.Enabled = boolPtr(true)
	}
	if out.ConcurrentMessages == 0 {
		out.ConcurrentMessages = DefaultConcurrentMessages
	}
	if out.ReplyConcurrentMessages == 0 {
		out.ReplyConcurrentMessages = out.ConcurrentMessages
	}
	orDuration(&out.VisibilityTimeout, DefaultVisibilityTimeout)
	if out.MaxAttempts == 0 {
		out.MaxAttempts = DefaultMaxAttempts
	}
	if out.FetchBatch == 0 {
		out.FetchBatch = DefaultFetchBatch
	}
	orDuration(&out.Retry.InitialDelay, DefaultRetryInitialDelay)
	orDuration(&out.Retry.MaxDelay, DefaultRetryMaxDelay)
	if out.Retry.Multiplier == 0 {
		out.Retry.Multiplier = DefaultRetryMultiplier
	}
	if out.Retry.Jitter == nil {
		j := DefaultRetryJitter
		out.Retry.Jitter = &j
	}
	if out.Transport == "" {
		out.Transport = TransportPostgres
	}
	return &out
}

// RedeliveryWindow is the longest a command of the domain can take to be answered when the
// worker of every attempt dies with it: MaxAttempts leases (each expires after
// VisibilityTimeout) plus the backoff between the attempts at its longest (jitter included).
// A process that waits for the reply at least this long loses no payment to a killed worker;
// it only waits longer. Call it on a config with defaults applied. With the defaults (30s, 3
// attempts, 1s doubling, 20% jitter) it is 93.6s.
func (d *DomainConfig) RedeliveryWindow() time.Duration {
	jitter := 0.0
	if d.Retry.Jitter != nil {
		jitter = *d.Retry.Jitter
	}
	window := time.Duration(d.MaxAttempts) * d.VisibilityTimeout.Std()
	delay := float64(d.Retry.InitialDelay)
	for n := 1; n < d.MaxAttempts; n++ {
		window += time.Duration(math.Min(delay, float64(d.Retry.MaxDelay)) * (1 + jitter))
		delay *= d.Retry.Multiplier
	}
	return window
}

// DomainEvents returns where a domain's events go: EventsNone or EventsKafka.
func (c *Config) DomainEvents(name string) string {
	if d, ok := c.Domains[name]; ok && d != nil && d.Events != "" {
		return d.Events
	}
	if c.Events == "" {
		return EventsNone
	}
	return c.Events
}

var nameRE = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,62}$`)

// validName reports whether s can name a domain: lower-case letters, digits, '-' and '_',
// starting with a letter, and no "__" (reserved for queue suffixes).
func validName(s string) bool {
	return nameRE.MatchString(s) && !containsDoubleUnderscore(s)
}

func containsDoubleUnderscore(s string) bool {
	for i := 0; i+1 < len(s); i++ {
		if s[i] == '_' && s[i+1] == '_' {
			return true
		}
	}
	return false
}

// Validate returns every problem in the configuration at once, joined, or nil. Call it on a
// config with defaults applied.
func (c *Config) Validate() error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	for _, name := range sortedKeys(c.Domains) {
		d := c.Domains[name]
		if !validName(name) {
			add("domains.%s: domain name must be lower-case letters, digits, '-' or '_', start with a letter, and not contain \"__\"", name)
		}
		if d.ConcurrentMessages < 1 {
			add("domains.%s.concurrent-messages: must be at least 1, got %d", name, d.ConcurrentMessages)
		}
		if d.ReplyConcurrentMessages < 1 {
			add("domains.%s.reply-concurrent-messages: must be at least 1, got %d", name, d.ReplyConcurrentMessages)
		}
		if d.VisibilityTimeout.Std() < time.Second {
			add("domains.%s.visibility-timeout: must be at least 1s, got %s", name, d.VisibilityTimeout)
		}
		if d.MaxAttempts < 1 {
			add("domains.%s.max-attempts: must be at least 1, got %d", name, d.MaxAttempts)
		}
		if d.FetchBatch < 1 || d.FetchBatch > 10_000 {
			add("domains.%s.fetch-batch: must be between 1 and 10000, got %d", name, d.FetchBatch)
		}
		if d.Retry.InitialDelay < 0 {
			add("domains.%s.retry.initial-delay: must not be negative", name)
		}
		if d.Retry.MaxDelay.Std() < d.Retry.InitialDelay.Std() {
			add("domains.%s.retry.max-delay: must be at least initial-delay (%s), got %s", name, d.Retry.InitialDelay, d.Retry.MaxDelay)
		}
		if d.Retry.Multiplier < 1 {
			add("domains.%s.retry.multiplier: must be at least 1, got %g", name, d.Retry.Multiplier)
		}
		if j := *d.Retry.Jitter; j < 0 || j > 1 {
			add("domains.%s.retry.jitter: must be between 0 and 1, got %g", name, j)
		}
		switch d.Transport {
		case TransportPostgres:
		case TransportAMQP:
			if c.AMQP.URL == "" {
				add("domains.%s.transport: amqp needs amqp.url", name)
			}
		case TransportAMQP10:
			if c.AMQP10.URL == "" {
				add("domains.%s.transport: amqp10 needs amqp10.url", name)
			}
		default:
			add("domains.%s.transport: must be postgres, amqp or amqp10, got %q", name, d.Transport)
		}
		switch d.Events {
		case "", EventsNone:
		case EventsKafka:
			if len(c.Kafka.BrokerList()) == 0 {
				add("domains.%s.events: kafka needs kafka.brokers", name)
			}
		default:
			add("domains.%s.events: must be none or kafka, got %q", name, d.Events)
		}
		if d.MaxRetryWindow < 0 {
			add("domains.%s.max-retry-window: must not be negative", name)
		}
	}
	switch c.Events {
	case "", EventsNone:
	case EventsKafka:
		if len(c.Kafka.BrokerList()) == 0 {
			add("events: kafka needs kafka.brokers")
		}
	default:
		add("events: must be none or kafka, got %q", c.Events)
	}
	c.validateLifecycleEvents(add)
	if c.AMQP.BackoutThreshold < 1 {
		add("amqp.backout-threshold: must be at least 1, got %d", c.AMQP.BackoutThreshold)
	}
	if len(c.AMQP.EventQueueList()) > 0 && c.AMQP.URL == "" {
		add("amqp.event-queues: needs amqp.url")
	}
	if c.AMQP10.EventQueues != "" {
		add("amqp10.event-queues: inbound events are consumed over AMQP 0-9-1 only; set amqp.event-queues")
	}
	if len(c.Kafka.EventTopicList()) > 0 && len(c.Kafka.BrokerList()) == 0 {
		add("kafka.event-topics: needs kafka.brokers")
	}
	if c.Kafka.EventGroup != "" && len(c.Kafka.EventTopicList()) == 0 {
		add("kafka.event-group: needs kafka.event-topics")
	}
	if c.AMQP10.BackoutThreshold < 1 {
		add("amqp10.backout-threshold: must be at least 1, got %d", c.AMQP10.BackoutThreshold)
	}
	if c.Outbox.BatchSize < 1 || c.Outbox.BatchSize > 10_000 {
		add("outbox.batch-size: must be between 1 and 10000, got %d", c.Outbox.BatchSize)
	}
	if c.Outbox.MaxLag.Std() < 0 {
		add("outbox.max-lag: must not be negative, got %s", c.Outbox.MaxLag)
	}
	if c.WatchdogInterval.Std() <= 0 {
		add("watchdog-interval: must be positive, got %s", c.WatchdogInterval)
	}
	for _, name := range sortedKeys(c.CommandSteps) {
		s := c.CommandSteps[name]
		if s.Domain != "" && !validName(s.Domain) {
			add("command-steps.%s.domain: %q is not a valid domain name", name, s.Domain)
		}
		if s.Timeout.Std() <= 0 {
			add("command-steps.%s.timeout: must be positive, got %s", name, s.Timeout)
		}
	}
	p := c.Process
	for _, kv := range []struct {
		key string
		d   Duration
	}{
		{"pending-poll-interval", p.PendingPollInterval}, {"retry-poll-interval", p.RetryPollInterval},
		{"timeout-check-interval", p.TimeoutCheckInterval}, {"deadline-check-interval", p.DeadlineCheckInterval},
		{"default-wait-timeout", p.DefaultWaitTimeout}, {"execution-lease", p.ExecutionLease},
		{"retention-interval", p.RetentionInterval},
	} {
		if kv.d.Std() <= 0 {
			add("process.%s: must be positive, got %s", kv.key, kv.d)
		}
	}
	if p.ConcurrentExecutions < 1 {
		add("process.concurrent-executions: must be at least 1, got %d", p.ConcurrentExecutions)
	}
	if p.Retention < 0 {
		add("process.retention: must be 0 (keep forever) or positive, got %s", p.Retention)
	}
	if p.LogCache < -1 {
		add("process.log-cache: must be -1 (off), 0 (the default) or a number of executions, got %d", p.LogCache)
	}
	for _, name := range sortedKeys(p.Types) {
		t := p.Types[name]
		if t == nil {
			continue
		}
		switch t.DeadlineAction {
		case "", "TSQ", "COMPENSATE", "FAIL":
		default:
			add("process.types.%s.deadline-action: must be TSQ, COMPENSATE or FAIL, got %q", name, t.DeadlineAction)
		}
		if t.DefaultWaitTimeout < 0 {
			add("process.types.%s.default-wait-timeout: must not be negative", name)
		}
	}
	if c.FetchCooldown < 0 {
		add("fetch-cooldown: must not be negative")
	}
	if c.ShutdownTimeout.Std() <= 0 {
		add("shutdown-timeout: must be positive, got %s", c.ShutdownTimeout)
	}
	if c.FetchPollInterval.Std() <= 0 {
		add("fetch-poll-interval: must be positive, got %s", c.FetchPollInterval)
	}
	if len(errs) == 0 {
		return nil
	}
	return &ConfigError{Problems: errs}
}

// ConfigError lists every problem found in a configuration.
type ConfigError struct {
	Problems []error
}

// Error lists every problem, one per line.
func (e *ConfigError) Error() string {
	msg := fmt.Sprintf("invalid configuration (%d problem", len(e.Problems))
	if len(e.Problems) != 1 {
		msg += "s"
	}
	msg += "):"
	for _, p := range e.Problems {
		msg += "\n  - " + p.Error()
	}
	return msg
}

// Unwrap returns the individual problems.
func (e *ConfigError) Unwrap() []error { return e.Problems }

// ErrInvalidConfig matches every ConfigError with errors.Is.
var ErrInvalidConfig = errors.New("invalid configuration")

// Is matches ErrInvalidConfig.
func (e *ConfigError) Is(target error) bool { return target == ErrInvalidConfig }

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// validateLifecycleEvents checks lifecycle-events, its topic and exchange, and the webhooks.
func (c *Config) validateLifecycleEvents(add func(format string, args ...any)) {
	switch c.LifecycleEvents {
	case "", EventsNone:
	case EventsKafka:
		if len(c.Kafka.BrokerList()) == 0 {
			add("lifecycle-events: kafka needs kafka.brokers")
		}
	case EventsAMQP:
		if c.AMQP.URL == "" {
			add("lifecycle-events: amqp needs amqp.url")
		}
	case EventsAMQP10:
		if c.AMQP10.URL == "" {
			add("lifecycle-events: amqp10 needs amqp10.url")
		}
	case EventsWebhook:
		if name := c.LifecycleWebhook(); name == "" {
			add("lifecycle-events-topic: webhook needs the name of an endpoint of webhooks.endpoints")
		} else if c.Webhooks.Endpoints[name] == nil {
			add("lifecycle-events-topic: no webhook endpoint %q in webhooks.endpoints", name)
		}
	default:
		add("lifecycle-events: must be none, kafka, amqp, amqp10 or webhook, got %q", c.LifecycleEvents)
	}
	if c.LifecycleEventsExchange && c.LifecycleEvents != EventsAMQP {
		add("lifecycle-events-exchange: only lifecycle-events: amqp publishes to an exchange")
	}
	names := make([]string, 0, len(c.Webhooks.Endpoints))
	for name := range c.Webhooks.Endpoints {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		ep := c.Webhooks.Endpoints[name]
		if ep == nil {
			add("webhooks.endpoints.%s: empty; give it a url and a secret", name)
			continue
		}
		if u, err := url.Parse(ep.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			add("webhooks.endpoints.%s.url: must be an http(s) URL, got %q", name, ep.URL)
		}
		if ep.Secret == "" {
			add("webhooks.endpoints.%s.secret: required to sign the requests", name)
		}
		if ep.Timeout < 0 {
			add("webhooks.endpoints.%s.timeout: must not be negative", name)
		}
	}
	if c.Webhooks.MaxAttempts < 0 {
		add("webhooks.max-attempts: must not be negative, got %d", c.Webhooks.MaxAttempts)
	}
}

// LifecycleWebhook returns the webhook endpoint lifecycle-events: webhook posts to: the
// lifecycle-events-topic, or the only endpoint when the topic is not set.
func (c *Config) LifecycleWebhook() string {
	if c.LifecycleEventsTopic != "" {
		return c.LifecycleEventsTopic
	}
	if len(c.Webhooks.Endpoints) == 1 {
		for name := range c.Webhooks.Endpoints {
			return name
		}
	}
	return ""
}
