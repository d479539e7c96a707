package payments

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/shopspring/decimal"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/examples/payments/fxapi"
	"github.com/commandbus/commandbus/internal/plumbing"
	"github.com/commandbus/commandbus/orchestration"
	"github.com/commandbus/commandbus/process"
	"github.com/commandbus/commandbus/saga"
)

// Options configure a Platform. Every field has a default.
type Options struct {
	// Runtime is the orchestration runtime the payment processes register with. Default: a new
	// runtime of the client (Platform.Runtime returns it); give one to run other models beside
	// the platform on the same client.
	Runtime *orchestration.Runtime
	// DB is the business database. Default: the commandbus driver's own database (the pgx pool
	// wrapped as *sql.DB on PostgreSQL, the single writer connection on SQLite). The platform's
	// tables are the payments migration line (MigrationLine), which `commandbus migrate up`
	// applies to the commandbus database and New checks there; with another DB, apply
	// Migrations to it as well.
	DB *sql.DB
	// Seed seeds the simulator, the simulated externals and the batch generator. Default: 1.
	Seed uint64
	// ApprovalThresholdUSD is the payment size (in US dollars) above which risk asks for a manual
	// approval. Default: 50,000.
	ApprovalThresholdUSD decimal.Decimal
	// MaxAmounts bounds the amount of one payment per debit currency; a larger one is refused
	// with a validation error on amount. Currencies it leaves out use DefaultMaxAmounts (about
	// ten million US dollars each).
	MaxAmounts map[string]decimal.Decimal
	// CustomersPerCurrency and BeneficiariesPerCurrency size the chart of accounts created at New.
	// Defaults: 20 and 20.
	CustomersPerCurrency     int
	BeneficiariesPerCurrency int
	// DefaultCutoff is how long after acceptance a payment's cutoff falls when the request gives
	// none. Default: 4h.
	DefaultCutoff time.Duration
	// DisableSimulator leaves approvals and network confirmations to operators and tests.
	DisableSimulator bool
	// SimulatorPollInterval is how often the network simulator scans the waiting payments for
	// answers it has not given yet (it answers what the externals tell it about at once).
	// Default: 1s.
	SimulatorPollInterval time.Duration
	// SimulatorLease is how long the instance that simulates the network holds the role without
	// renewing it; when it dies, another instance takes over after at most this long.
	// Default: 5s.
	SimulatorLease time.Duration
	// SimulatorWorkers is how many payments the simulator answers at once. Default: 8.
	SimulatorWorkers int
	// FXAPIURL points the FX anti-corruption layer at an external FX API (configuration key
	// fx.url; `commandbus simulate fx` serves the simulated one). Default: the simulated provider,
	// served by this instance on a random localhost port with its contracts in the database, so
	// the endpoints of every replica are one provider.
	FXAPIURL string
	// FXTimeout bounds one HTTP attempt to the FX API. Default: 2s.
	FXTimeout time.Duration
	// FXAttempts is how many HTTP attempts one booking makes before the command is retried by the
	// bus. Default: 3.
	FXAttempts int
	// Logger defaults to the client's logger.
	Logger *slog.Logger
	// DailyRunCron and DailyRunZone are when the declared schedule DailyRunSchedule runs the
	// day's scheduled payments (six-field cron, IANA zone). Default: DefaultDailyRunCron in
	// DefaultDailyRunZone.
	DailyRunCron string
	DailyRunZone string
}

func (o Options) withDefaults() Options {
	if o.DailyRunCron == "" {
		o.DailyRunCron = DefaultDailyRunCron
	}
	if o.DailyRunZone == "" {
		o.DailyRunZone = DefaultDailyRunZone
	}
	if o.Seed == 0 {
		o.Seed = 1
	}
	if o.ApprovalThresholdUSD.IsZero() {
		o.ApprovalThresholdUSD = decimal.NewFromInt(50_000)
	}
	if o.CustomersPerCurrency == 0 {
		o.CustomersPerCurrency = 20
	}
	if o.BeneficiariesPerCurrency == 0 {
		o.BeneficiariesPerCurrency = 20
	}
	if o.DefaultCutoff == 0 {
		o.DefaultCutoff = 4 * time.Hour
	}
	if o.SimulatorPollInterval == 0 {
		o.SimulatorPollInterval = time.Second
	}
	if o.SimulatorLease == 0 {
		o.SimulatorLease = 5 * time.Second
	}
	if o.SimulatorWorkers == 0 {
		o.SimulatorWorkers = 8
	}
	if o.FXTimeout == 0 {
		o.FXTimeout = 2 * time.Second
	}
	if o.FXAttempts == 0 {
		o.FXAttempts = 3
	}
	return o
}

// Platform is the reference payments platform: five bounded contexts as command handlers, two
// processes that run a payment, the FX provider and network simulators, batches, and the
// operations the REST API and the demo call. Create it with New before starting the client; the
// client's Start and Stop start and stop it too.
type Platform struct {
	client  *commandbus.Client
	rt      *orchestration.Runtime
	exec    driver.Executor
	store   *store
	opts    Options
	logger  *slog.Logger
	step    *process.Manager[StepState]
	manager *process.Manager[ManagerState]
	// dailyRun runs the day's scheduled payments (TypeDailyRun) on its schedule.
	dailyRun *process.Manager[DailyRunState]
	saga     *saga.Manager
	fx       *fxGateway
	fxAPI    *fxapi.Server
	sim      *simulator
	faults   faults

	randMu sync.Mutex
	rand   *rand.Rand

	mu      sync.Mutex
	started bool

	// afterAccountsLocked, set only by tests, runs inside SubmitPayment's transaction once the
	// accounts' rows are locked.
	afterAccountsLocked func(ctx context.Context)
	// beforeFxBooking, set only by tests, runs in bookFx before it asks the provider; an error
	// it returns ends the booking with that error.
	beforeFxBooking func(ctx context.Context, key string) error
	// beforeFxCancel, set only by tests, runs in cancelFx before anything else.
	beforeFxCancel func(ctx context.Context)
}

// New builds the platform on a client that is not started yet: it checks that the platform's
// tables are migrated (MigrationLine; it never creates them: run `commandbus migrate up`), creates
// the chart of accounts (idempotently), registers the bounded contexts' handlers and the two
// processes, and binds the simulated FX API. It registers itself with client.AddService, so
// client.Start starts the FX API and the simulator and client.Stop stops them.
func New(client *commandbus.Client, opts Options) (*Platform, error) {
	if client == nil {
		return nil, errors.New("payments: New needs a client")
	}
	if client.Started() {
		return nil, errors.New("payments: create the platform before starting the client (its handlers start with the client)")
	}
	opts = opts.withDefaults()
	if err := opts.checkMaxAmounts(); err != nil {
		return nil, err
	}
	st, err := openStore(client.Driver(), opts.DB)
	if err != nil {
		return nil, err
	}
	logger := opts.Logger
	if logger == nil {
		logger = client.Logger()
	}
	p := &Platform{
		client: client, exec: client.Driver().Executor(), store: st, opts: opts,
		logger: logger.With("component", "payments"),
		rand:   rand.New(rand.NewPCG(opts.Seed, opts.Seed^0x5eed)),
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := checkSchema(ctx, client.Driver()); err != nil {
		return nil, err
	}
	if err := p.seedAccounts(ctx); err != nil {
		return nil, err
	}
	fxURL := opts.FXAPIURL
	if fxURL == "" {
		if p.fxAPI, err = fxapi.ListenStore("127.0.0.1:0", opts.Seed, fxStore{st}); err != nil {
			return nil, err
		}
		fxURL = p.fxAPI.URL()
	}
	p.fx = newFxGateway(fxURL, opts.FXTimeout, opts.FXAttempts)

	setDefaultWaitTimeouts(client.Config())

	h := client.Config().Handlers
	commandbus.AddHandler(h, DomainAccounts, commandbus.HandlerFunc[CheckBalance](p.handleCheckBalance))
	commandbus.AddHandler(h, DomainAccounts, commandbus.HandlerFunc[ReleaseHold](p.handleReleaseHold))
	commandbus.AddHandler(h, DomainLimits, commandbus.HandlerFunc[CheckDailyLimit](p.handleCheckDailyLimit))
	commandbus.AddHandler(h, DomainLimits, commandbus.HandlerFunc[ReleaseDailyLimit](p.handleReleaseDailyLimit))
	commandbus.AddHandler(h, DomainRisk, commandbus.HandlerFunc[BookRisk](p.handleBookRisk))
	commandbus.AddHandler(h, DomainRisk, commandbus.HandlerFunc[UnwindRisk](p.handleUnwindRisk))
	commandbus.AddHandler(h, DomainFx, commandbus.HandlerFunc[BookFx](p.handleBookFx))
	commandbus.AddHandler(h, DomainFx, commandbus.HandlerFunc[BookFxContract](p.handleBookFxContract))
	commandbus.AddHandler(h, DomainFx, commandbus.HandlerFunc[CancelFx](p.handleCancelFx))
	commandbus.AddHandler(h, DomainFx, commandbus.HandlerFunc[CancelFxContract](p.handleCancelFxContract))
	commandbus.AddHandler(h, DomainPayments, commandbus.HandlerFunc[SubmitPayment](p.handleSubmitPayment))
	commandbus.AddHandler(h, DomainPayments, commandbus.HandlerFunc[RecallPayment](p.handleRecallPayment))

	if p.rt = opts.Runtime; p.rt == nil {
		if p.rt, err = orchestration.New(client, orchestration.Config{}); err != nil {
			return nil, err
		}
	} else if p.rt.Client() != client {
		return nil, errors.New("payments: Options.Runtime belongs to another client")
	}
	if p.step, err = process.NewManager(p.rt, process.Process[StepState](stepProcess{p: p})); err != nil {
		return nil, err
	}
	registerStepResponses(p.step)
	if p.manager, err = process.NewManager(p.rt, process.Process[ManagerState](managerProcess{p: p})); err != nil {
		return nil, err
	}
	if p.saga, err = saga.Register(p.rt, p.sagaDefinition()); err != nil {
		return nil, err
	}
	if err := p.registerDailyRun(opts); err != nil {
		return nil, err
	}
	p.sim = newSimulator(p)
	client.AddService(p)
	return p, nil
}

// Runtime returns the orchestration runtime the payment processes run on; the REST API, the
// console and the CLI operate executions through it.
func (p *Platform) Runtime() *orchestration.Runtime { return p.rt }

// Start serves the simulated FX API, starts any payment accepted but not started before a
// crash, and starts the network simulator. The client calls it; calling it again does nothing.
func (p *Platform) Start(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.started {
		return nil
	}
	p.started = true
	if p.fxAPI != nil {
		p.fxAPI.Serve()
	}
	if err := p.startUnstarted(ctx); err != nil {
		p.logger.Warn("starting payments left unstarted failed; they stay SCHEDULED", "error", err)
	}
	if !p.opts.DisableSimulator {
		p.sim.start()
	}
	return nil
}

// Stop stops the simulator and the simulated FX API.
func (p *Platform) Stop(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.started {
		if p.fxAPI != nil {
			return p.fxAPI.Close(ctx)
		}
		return nil
	}
	p.started = false
	p.sim.stop()
	if p.fxAPI != nil {
		return p.fxAPI.Close(ctx)
	}
	return nil
}

// DefaultPaymentWaitTimeout is the payment processes' default wait timeout, which the L4
// confirmation waits for; process.types.<type>.default-wait-timeout overrides it.
const DefaultPaymentWaitTimeout = 24 * time.Hour

// setDefaultWaitTimeouts gives the payment process types DefaultPaymentWaitTimeout unless the
// configuration sets their default wait timeout (process.types.<type>.default-wait-timeout).
func setDefaultWaitTimeouts(cfg *commandbus.Config) {
	for _, typ := range ProcessTypes {
		if cfg.Process.Types == nil {
			cfg.Process.Types = map[string]*commandbus.ProcessTypeConfig{}
		}
		t := cfg.Process.Types[typ]
		if t == nil {
			t = &commandbus.ProcessTypeConfig{}
			cfg.Process.Types[typ] = t
		}
		if t.DefaultWaitTimeout == 0 {
			t.DefaultWaitTimeout = commandbus.Duration(DefaultPaymentWaitTimeout)
		}
	}
}

// Client returns the platform's client.
func (p *Platform) Client() *commandbus.Client { return p.client }

// StepManager returns the step process's manager (PaymentStep).
func (p *Platform) StepManager() *process.Manager[StepState] { return p.step }

// ProcessManager returns the process manager's manager (PaymentManager).
func (p *Platform) ProcessManager() *process.Manager[ManagerState] { return p.manager }

// SagaManager returns the payment saga's manager (PaymentSaga).
func (p *Platform) SagaManager() *saga.Manager { return p.saga }

// FXAPIURL is the base URL of the FX API the anti-corruption layer calls.
func (p *Platform) FXAPIURL() string { return p.fx.baseURL }

// FXAPI returns the simulated FX provider, or nil when Options.FXAPIURL points elsewhere.
func (p *Platform) FXAPI() *fxapi.Server { return p.fxAPI }

// InjectFault makes the next calls of a simulated external fail (see Fault).
func (p *Platform) InjectFault(f Fault) error {
	known := false
	for _, s := range []string{StepCheckBalance, StepCheckDailyLimit, StepBookRisk, StepBookFx, StepSubmitPayment} {
		known = known || s == f.Step
	}
	if !known {
		return &commandbus.ValidationError{Field: "step", Message: fmt.Sprintf("%q is not a simulated external step", f.Step)}
	}
	switch f.Class {
	case FaultPermanent, FaultTransient, FaultBusiness, FaultTimeout, FaultLostReply:
	default:
		return &commandbus.ValidationError{Field: "class", Message: fmt.Sprintf("unknown fault class %q", f.Class)}
	}
	p.faults.add(f)
	return nil
}

// now is the client's clock (a fake one in tests).
func (p *Platform) now() time.Time { return p.client.Now() }

func (p *Platform) setPaymentStatus(ctx context.Context, id, status string) error {
	_, err := p.store.db.ExecContext(ctx, p.store.q(`UPDATE {t}payment SET status = $2, updated_at = $3 WHERE id = $1`), id, status, micros(p.now()))
	return err
}

// audit records an operator action in commandbus's audit log.
func (p *Platform) audit(ctx context.Context, entityType, entityID, action, actor, reason string, details any) {
	encoded, _ := json.Marshal(details)
	if err := p.exec.AuditLogInsert(ctx, &driver.AuditLogInsertParams{
		EntityType: entityType, EntityID: entityID, Action: action, Actor: actor, Reason: reason,
		Details: encoded, Now: plumbing.DriverNow(p.client),
	}); err != nil {
		p.logger.Error("writing the audit log failed", "entity", entityType, "id", entityID, "action", action, "error", err)
	}
	p.logger.Info("operator action", "entity", entityType, "id", entityID, "action", action, "actor", actor, "reason", reason)
}

// DefaultDomainConfigs are sensible concurrency settings for the platform's domains: replies to
// the payments domain resume processes, so it gets more reply slots.
func DefaultDomainConfigs(concurrency int) map[string]*commandbus.DomainConfig {
	if concurrency <= 0 {
		concurrency = 10
	}
	out := map[string]*commandbus.DomainConfig{}
	for _, d := range Domains {
		out[d] = &commandbus.DomainConfig{ConcurrentMessages: concurrency, FetchBatch: 200}
	}
	out[DomainPayments].ReplyConcurrentMessages = 2 * concurrency
	return out
}
