package commandbus

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/batching"
	"github.com/commandbus/commandbus/internal/clock"
	"github.com/commandbus/commandbus/internal/completer"
	"github.com/commandbus/commandbus/internal/maintenance"
	"github.com/commandbus/commandbus/internal/notifier"
	"github.com/commandbus/commandbus/internal/worker"
	"github.com/commandbus/commandbus/migrate"
	"github.com/commandbus/commandbus/outbox"
	"github.com/commandbus/commandbus/tracing"
)

var stderr = os.Stderr

// Client sends commands, runs the handlers of its enabled domains, and answers queries. Create it
// with NewClient, Start it to work commands, and Stop it to shut down gracefully. A Client that is
// never started can still send and query.
type Client struct {
	drv      driver.Driver
	exec     driver.Executor
	config   *Config
	logger   *slog.Logger
	handlers *Handlers
	metrics  *metrics
	tracer   *tracing.Tracer
	// messaging and inbox serve brokered transports; routing says which domains use them.
	messaging *outbox.Metrics
	inbox     *outbox.Inbox
	routing   brokerRouting
	// delivered group-commits the outcomes of brokered deliveries (see writeDelivered).
	delivered     *batching.Group[*deliveredOutcome]
	deliveredOnce sync.Once

	randMu sync.Mutex

	mu        sync.Mutex
	started   bool
	stopped   bool
	runCancel context.CancelFunc
	notifier  *notifier.Notifier
	completer *completer.Completer
	workers   []*worker.Worker
	services  []Service
	upkeep    *maintenance.Runner

	notifierMu sync.Mutex // guards creating the notifier; separate from mu so services can subscribe in Start
	extMu      sync.Mutex // guards extensions; separate from mu because create may call back
	extensions map[any]any
}

// Service is a component started and stopped with a Client, such as a process manager's runner.
type Service interface {
	// Start begins background work; it must not block.
	Start(ctx context.Context) error
	// Stop ends it gracefully within ctx.
	Stop(ctx context.Context) error
}

// NewClient returns a client on drv. config may be nil for all defaults. It validates the
// configuration and returns every problem at once.
func NewClient(drv driver.Driver, config *Config) (*Client, error) {
	if drv == nil {
		return nil, errors.New("commandbus: driver is nil; wrap a pool with pgdriver.New or open SQLite with sqlitedriver.Open")
	}
	if config == nil {
		config = &Config{}
	}
	cfg := config.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := &Client{
		drv:      drv,
		exec:     drv.Executor(),
		config:   cfg,
		logger:   cfg.Logger,
		handlers: cfg.Handlers,
		tracer:   tracing.New(cfg.TracerProvider),
	}
	m, err := newMetrics(cfg.MetricsRegisterer)
	if err != nil {
		return nil, err
	}
	c.metrics = m
	if reg := cfg.MetricsRegisterer; reg != nil {
		// Clients sharing a registry share the first one's database collector.
		if _, err := register(reg, newDatabaseCollector(c.exec, c.reportedQueues, c.now, c.Now, c.logger)); err != nil {
			return nil, err
		}
	}
	if c.messaging, err = outbox.NewMetrics(cfg.MetricsRegisterer); err != nil {
		return nil, err
	}
	c.inbox = outbox.NewInbox(c.messaging)
	c.routing = newBrokerRouting(cfg)
	return c, nil
}

// Driver returns the client's driver.
func (c *Client) Driver() driver.Driver { return c.drv }

// Config returns the client's configuration with defaults applied. Do not modify it.
func (c *Client) Config() *Config { return c.config }

// Logger returns the client's logger.
func (c *Client) Logger() *slog.Logger { return c.logger }

// Tracer is the tracer of the client's spans (Config.TracerProvider, else the global provider),
// for the parts built on the client that add their own (the HTTP server's request spans).
func (c *Client) Tracer() *tracing.Tracer { return c.tracer }

// AddService registers a component to start and stop with the client. Call it before Start.
// Services start after the client's workers, in the order added, and stop before them, in
// reverse order. It is public, unlike the client's other plumbing, because programs outside this
// module use it: they register the transport consumers they build (transport/amqp,
// transport/amqp10) and their own background services, to share the client's lifecycle.
func (c *Client) AddService(s Service) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.services = append(c.services, s)
}

// extension returns the value registered under key, creating it with create on first use. It is
// how packages built on the client (process managers, the outbox relay) keep one shared component
// per client; create runs at most once per key. The module's packages reach it through
// internal/plumbing.
func (c *Client) extension(key any, create func() any) any {
	c.extMu.Lock()
	defer c.extMu.Unlock()
	if v, ok := c.extensions[key]; ok {
		return v
	}
	if c.extensions == nil {
		c.extensions = map[any]any{}
	}
	v := create()
	c.extensions[key] = v
	return v
}

// ErrWorkersStalled is returned by CheckWorkers when a claim loop has not gone round for
// three poll intervals.
var ErrWorkersStalled = errors.New("commandbus: a worker's claim loop has stalled")

// CheckWorkers is the workers' heartbeat check for a readiness probe: nil when the client is
// started and every queue's claim loop went round within three of its poll intervals (plus
// the 30s a claim may take), else an error saying which (ErrWorkersStalled for a stalled
// loop). It reads no database.
func (c *Client) CheckWorkers() error {
	c.mu.Lock()
	started, stopped, workers := c.started, c.stopped, c.workers
	c.mu.Unlock()
	if !started || stopped {
		return errors.New("commandbus: the client is not running")
	}
	for _, w := range workers {
		beat := w.LastBeat()
		if beat.IsZero() {
			continue // its loop is starting
		}
		if age := time.Since(beat); age > 3*w.PollInterval()+30*time.Second {
			return fmt.Errorf("%w: queue %s last went round %s ago", ErrWorkersStalled, w.Queue(), age.Round(time.Second))
		}
	}
	return nil
}

// Started reports whether Start has run (and Stop has not).
func (c *Client) Started() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.started && !c.stopped
}

// subscribe returns a channel signalled when topic is notified (see Notify), and a function to
// unsubscribe. It is how services wake on new work; it works once the client is started.
func (c *Client) subscribe(topic string) (<-chan struct{}, func()) {
	return c.getNotifier().Subscribe(topic)
}

func (c *Client) getNotifier() *notifier.Notifier {
	c.notifierMu.Lock()
	defer c.notifierMu.Unlock()
	if c.notifier == nil {
		c.notifier = notifier.New(c.drv.Listener(), c.logger)
	}
	return c.notifier
}

// now is the time passed to the driver: nil lets the database clock decide, unless a test clock
// was injected.
func (c *Client) now() *time.Time {
	if clock.IsReal(c.config.Clock) {
		return nil
	}
	t := c.config.Clock.Now()
	return &t
}

// Now returns the client's clock time.
func (c *Client) Now() time.Time { return c.config.Clock.Now() }

// Start checks the schema version and starts the workers of every enabled domain that has
// handlers, the notification listener, and registered services.
func (c *Client) Start(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.started && !c.stopped {
		return errors.New("commandbus: client already started")
	}
	c.started, c.stopped, c.workers = false, false, nil // a stopped client starts afresh
	if err := migrate.CheckVersion(ctx, c.drv); err != nil {
		return err
	}
	runCtx, cancel := context.WithCancel(context.Background())
	c.runCancel = cancel
	c.getNotifier().Start()

	c.completer = completer.New(completer.Config{
		Exec:      c.exec,
		Now:       c.now,
		Logger:    c.logger,
		OnFlushed: c.afterFlush,
	})
	c.completer.Start()

	if *c.config.Features.CommandHandlers {
		for _, domain := range c.handlers.commandDomains() {
			dc := c.config.Domain(domain)
			if !*dc.Enabled || c.isAMQP(domain) {
				continue // an amqp domain's commands arrive through its broker consumer
			}
			c.workers = append(c.workers, c.newWorker(CommandQueue(domain), domain, dc.ConcurrentMessages, dc))
		}
	}
	if *c.config.Features.ReplyProcessing {
		for _, domain := range c.handlers.replyDomains() {
			dc := c.config.Domain(domain)
			if !*dc.Enabled {
				continue
			}
			c.workers = append(c.workers, c.newWorker(ReplyQueue(domain), domain, dc.ReplyConcurrentMessages, dc))
		}
	}
	for _, w := range c.workers {
		w.Start()
	}
	c.upkeep = c.newMaintenance()
	c.upkeep.Start(runCtx)
	for _, s := range c.services {
		if err := s.Start(ctx); err != nil {
			c.started = true
			c.mu.Unlock()
			_ = c.Stop(context.Background())
			c.mu.Lock()
			return fmt.Errorf("starting service: %w", err)
		}
	}
	c.started = true
	c.logger.Info("commandbus client started", "worker_id", c.config.WorkerID, "driver", c.drv.Name(), "queues", len(c.workers))
	return nil
}

func (c *Client) newWorker(queue, domain string, concurrency int, dc *DomainConfig) *worker.Worker {
	wake, _ := c.notifier.Subscribe(queueTopic(queue))
	lease := dc.VisibilityTimeout.Std()
	return worker.New(worker.Config{
		Queue:        queue,
		Concurrency:  concurrency,
		FetchBatch:   dc.FetchBatch,
		Lease:        lease,
		PollInterval: c.config.FetchPollInterval.Std(),
		Cooldown:     c.config.FetchCooldown.Std(),
		Claim: func(ctx context.Context, max int) ([]*driver.CommandRow, error) {
			rows, err := c.claimTraced(ctx, &driver.CommandClaimParams{
				Queue: queue, Max: max, Lease: lease, WorkerID: c.config.WorkerID, Now: c.now(),
			})
			c.metrics.claimed(domain, queue, len(rows))
			return rows, err
		},
		Run:       c.runCommand,
		Complete:  c.completer.Add,
		Wake:      wake,
		OnRunning: func(n int) { c.metrics.running(domain, queue, n) },
		Logger:    c.logger,
	})
}

// Stop shuts down gracefully: it stops claiming, lets running handlers finish until ctx ends (or
// Config.ShutdownTimeout when ctx has no deadline), then cancels the rest and releases their
// commands for another worker, writes every outcome, and stops services.
func (c *Client) Stop(ctx context.Context) error {
	c.mu.Lock()
	if !c.started || c.stopped {
		c.mu.Unlock()
		return nil
	}
	c.stopped = true
	workers, services := c.workers, c.services
	c.mu.Unlock()

	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.config.ShutdownTimeout.Std())
		defer cancel()
	}
	var errs []error
	for i := len(services) - 1; i >= 0; i-- {
		if err := services[i].Stop(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	var wg sync.WaitGroup
	for _, w := range workers {
		wg.Add(1)
		go func() { defer wg.Done(); w.Stop(ctx, time.Second) }()
	}
	wg.Wait()
	c.upkeep.Stop()
	c.completer.Stop()
	c.runCancel()
	c.notifier.Stop()
	c.logger.Info("commandbus client stopped", "worker_id", c.config.WorkerID)
	return errors.Join(errs...)
}

// afterFlush wakes the reply queues that received replies and records metrics.
func (c *Client) afterFlush(applied map[uuid.UUID]bool, batch []*driver.CommandCompletion) {
	topics := map[string]struct{}{}
	for _, comp := range batch {
		if !applied[comp.ID] {
			c.metrics.fenceRejected()
			continue
		}
		if comp.Reply != nil {
			topics[queueTopic(comp.Reply.Queue)] = struct{}{}
		}
		if len(comp.Outbox) > 0 {
			topics[outbox.NotifyTopic] = struct{}{}
		}
	}
	if len(topics) == 0 {
		return
	}
	list := make([]string, 0, len(topics))
	for t := range topics {
		list = append(list, t)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.exec.Notify(ctx, list); err != nil {
		c.logger.Warn("notifying reply queues failed; they will be polled", "error", err)
	}
}

// queueTopic is the notification topic of a queue.
func queueTopic(queue string) string { return "queue:" + queue }

// QueueTopic is the notification topic of a queue, for services that send commands themselves.
func QueueTopic(queue string) string { return queueTopic(queue) }

func defaultWorkerID() string {
	host, _ := os.Hostname()
	if host == "" {
		host = "worker"
	}
	var b [3]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}
