package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/examples/payments"
)

// PaymentsConfig configures the end-to-end payments benchmark: the reference platform with its
// five bounded contexts, the FX API over HTTP and the network simulator, with no simulated delay
// and no injected failure.
type PaymentsConfig struct {
	// Payments to run in batch mode. Default: 5000. Ignored when Rate is set.
	Payments int `json:"payments"`
	// ProcessType is PaymentManager (default) or PaymentStep.
	ProcessType string `json:"process_type"`
	// Rate, when positive, submits payments one by one through the API at this many per second
	// for Duration instead of running one batch, and samples the backlog every second.
	Rate float64 `json:"rate,omitempty"`
	// Duration of rate mode. Default: 10s.
	Duration time.Duration `json:"duration,omitempty"`
	// Instances are clients (each with the platform's handlers and runners) in this process,
	// sharing the database as a cluster's replicas would. Default: 1.
	Instances int `json:"instances"`
	// Concurrency is each domain's concurrent-messages per instance. Default: 48.
	Concurrency int `json:"concurrency"`
	// Executions is process.concurrent-executions per instance. Default: 400.
	Executions int `json:"executions"`
	// Submitters are the goroutines calling SubmitPayment in rate mode. Default: 32.
	Submitters int `json:"submitters,omitempty"`
	// Accounts is how many customers, and how many beneficiaries, of each currency rate mode pays
	// from and to, in turn: 1 to ChartAccounts. Default: ChartAccounts, every one of the
	// benchmark's chart. A few accounts measure the row-lock convoys on them (every payment of a
	// debtor waits for the previous one's commit) rather than the platform.
	Accounts int `json:"accounts,omitempty"`
	// Handoff, with a broker, hands the outbox rows each process checkpoint writes (its commands)
	// to the instance's relay right after the commit (orchestration.Runtime.HandOffOutbox).
	Handoff bool `json:"handoff,omitempty"`
	// AMQPURL, when set, carries BrokerDomains' commands and replies over this RabbitMQ (AMQP
	// 0-9-1) through the outbox relay, and samples the broker's queue depth.
	AMQPURL string `json:"amqp_url,omitempty"`
	// BrokerDomains are the domains on the broker. Default with AMQPURL: fx and payments.
	BrokerDomains []string     `json:"broker_domains,omitempty"`
	Logger        *slog.Logger `json:"-"`
	Progress      io.Writer    `json:"-"`
}

// ChartAccounts is how many customers, and how many beneficiaries, of each currency the
// benchmark's platform has. A bank's batch pays from many debtors to many creditors; a handful of
// accounts would measure row-lock convoys on them instead of the platform.
const ChartAccounts = 500

// WithDefaults fills unset fields.
func (c PaymentsConfig) WithDefaults() PaymentsConfig {
	if c.Payments == 0 {
		c.Payments = 5000
	}
	if c.ProcessType == "" {
		c.ProcessType = payments.TypePaymentManager
	}
	if c.Rate > 0 && c.Duration == 0 {
		c.Duration = 10 * time.Second
	}
	if c.Rate <= 0 {
		c.Rate, c.Duration = 0, 0
	}
	if c.Instances == 0 {
		c.Instances = 1
	}
	if c.Concurrency == 0 {
		c.Concurrency = 48
	}
	if c.Executions == 0 {
		c.Executions = 400
	}
	if c.Submitters == 0 {
		c.Submitters = 32
	}
	if c.Accounts == 0 {
		c.Accounts = ChartAccounts
	}
	if c.AMQPURL != "" && len(c.BrokerDomains) == 0 {
		c.BrokerDomains = []string{payments.DomainFx, payments.DomainPayments}
	}
	return c
}

// BacklogSample is the rate-mode backlog at one moment: payments submitted and not yet terminal.
type BacklogSample struct {
	AtS       float64 `json:"at_s"`
	Submitted int64   `json:"submitted"`
	Terminal  int64   `json:"terminal"`
	Backlog   int64   `json:"backlog"`
	// BrokerDepth is the messages waiting in the brokered domains' queues (with --amqp-url).
	BrokerDepth int64 `json:"broker_depth,omitempty"`
}

// PaymentsResult is what the payments benchmark prints.
type PaymentsResult struct {
	Driver       string          `json:"driver"`
	Payments     int             `json:"payments"`
	Completed    int             `json:"completed"`
	ElapsedS     float64         `json:"elapsed_s"`
	PaymentsPerS float64         `json:"payments_per_s"`
	P50Ms        float64         `json:"p50_ms"` // acceptance to COMPLETED
	P99Ms        float64         `json:"p99_ms"`
	Duplicates   int             `json:"duplicate_submissions"`
	Backlog      []BacklogSample `json:"backlog,omitempty"`
	Config       PaymentsConfig  `json:"config"`
	GoMaxProcs   int             `json:"gomaxprocs"`
	// AutovacuumOff is set when the PostgreSQL server runs without autovacuum: the queue tables
	// then keep every dead row, and a long run slows down as they grow (a production server
	// runs autovacuum).
	AutovacuumOff bool `json:"autovacuum_off,omitempty"`
	// RelayClaims and EmptyRelayClaims count the outbox relays' claims and those that found
	// nothing (with --amqp-url), what their polling costs the database.
	RelayClaims      int64 `json:"relay_claims,omitempty"`
	EmptyRelayClaims int64 `json:"empty_relay_claims,omitempty"`
}

// autovacuumOff reports whether drv is PostgreSQL with autovacuum turned off.
func autovacuumOff(ctx context.Context, drv driver.Driver) bool {
	pooled, ok := drv.(interface{ Pool() *pgxpool.Pool })
	if !ok {
		return false
	}
	var setting string
	return pooled.Pool().QueryRow(ctx, `SHOW autovacuum`).Scan(&setting) == nil && setting == "off"
}

// RunPayments runs payments end to end on drv (a *pgdriver.Driver or *sqlitedriver.Driver) and
// measures until every one is terminal. It fails if any payment does not complete or if the
// platform's invariants do not hold afterwards.
func RunPayments(ctx context.Context, drv driver.Driver, cfg PaymentsConfig) (*PaymentsResult, error) {
	cfg = cfg.WithDefaults()
	if cfg.Accounts < 1 || cfg.Accounts > ChartAccounts {
		return nil, fmt.Errorf("bench: accounts is %d; it must be 1 to %d (customers and beneficiaries per currency of the chart)", cfg.Accounts, ChartAccounts)
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	var platforms []*payments.Platform
	var clients []*commandbus.Client
	defer func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, c := range clients {
			_ = c.Stop(stopCtx)
		}
	}()
	var broker *paymentsBroker
	if cfg.AMQPURL != "" {
		var err error
		if broker, err = newPaymentsBroker(cfg.AMQPURL, cfg.BrokerDomains); err != nil {
			return nil, fmt.Errorf("the broker at --amqp-url: %w", err)
		}
		defer broker.close()
	}
	for i := range cfg.Instances {
		clientCfg := &commandbus.Config{
			Logger:   logger,
			WorkerID: fmt.Sprintf("bench-payments-%d", i),
			Domains:  payments.DefaultDomainConfigs(cfg.Concurrency),
			Process: commandbus.ProcessConfig{
				ConcurrentExecutions: cfg.Executions,
				PendingPollInterval:  commandbus.Duration(100 * time.Millisecond),
				RetryPollInterval:    commandbus.Duration(time.Second),
			},
			FetchPollInterval: commandbus.Duration(200 * time.Millisecond),
		}
		if broker != nil {
			broker.configure(clientCfg)
		}
		client, err := commandbus.NewClient(drv, clientCfg)
		if err != nil {
			return nil, err
		}
		p, err := payments.New(client, payments.Options{
			Seed:                     1,
			DisableSimulator:         i > 0, // one network is enough for the cluster
			SimulatorWorkers:         16,
			Logger:                   logger,
			CustomersPerCurrency:     ChartAccounts,
			BeneficiariesPerCurrency: ChartAccounts,
		})
		if err != nil {
			return nil, err
		}
		if broker != nil {
			relay, err := broker.wire(client, logger)
			if err != nil {
				return nil, err
			}
			if cfg.Handoff {
				p.Runtime().HandOffOutbox(relay)
			}
		}
		if err := client.Start(ctx); err != nil {
			return nil, err
		}
		platforms = append(platforms, p)
		clients = append(clients, client)
	}
	p := platforms[0]
	day := time.Now().UTC().Format(time.DateOnly)
	happy, _ := payments.Preset(payments.PresetHappy)

	baseline, _, err := terminalCount(ctx, drv, cfg.ProcessType)
	if err != nil {
		return nil, err
	}
	noAutovacuum := autovacuumOff(ctx, drv)
	if noAutovacuum && cfg.Progress != nil {
		fmt.Fprintln(cfg.Progress, "warning: autovacuum is off on this PostgreSQL server: the queue tables keep their dead rows and a long run slows down as they grow")
	}
	start := time.Now()
	var submitted atomic.Int64
	var samples []BacklogSample
	record := func(s BacklogSample) {
		if broker != nil {
			s.BrokerDepth = broker.depth()
		}
		samples = append(samples, s)
	}
	var batchID uuid.UUID
	total := cfg.Payments
	if cfg.Rate > 0 {
		total = int(cfg.Rate * cfg.Duration.Seconds())
		if err := submitAtRate(ctx, platforms, cfg, total, day, &submitted, record, start, drv, baseline); err != nil {
			return nil, err
		}
	} else {
		batch, err := p.CreateBatch(ctx, cfg.Payments, day, cfg.ProcessType, happy)
		if err != nil {
			return nil, err
		}
		batchID = batch.ID
		submitted.Store(int64(cfg.Payments))
	}
	last := int64(0)
	ticker := time.NewTicker(time.Second)
	defer ticker.Stop()
	for {
		terminal, inTSQ, err := terminalCount(ctx, drv, cfg.ProcessType)
		if err != nil {
			return nil, err
		}
		terminal -= baseline
		if inTSQ > 0 {
			return nil, fmt.Errorf("%d benchmark payments went to the troubleshooting queue", inTSQ)
		}
		if terminal >= int64(total) {
			break
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-ticker.C:
			if cfg.Progress != nil {
				fmt.Fprintf(cfg.Progress, "  %6.1fs  %8d/%d terminal  %6d/s\n", time.Since(start).Seconds(), terminal, total, terminal-last)
			}
			last = terminal
			if cfg.Rate > 0 {
				record(BacklogSample{AtS: round(time.Since(start).Seconds(), 1), Submitted: submitted.Load(), Terminal: terminal, Backlog: submitted.Load() - terminal})
			}
		case <-time.After(completionPoll):
		}
	}
	elapsed := time.Since(start)
	sum, err := p.Summary(ctx, batchID)
	if err != nil {
		return nil, err
	}
	if sum.LastCompletedAt.After(start) {
		elapsed = sum.LastCompletedAt.Sub(start)
	}
	if batchID == uuid.Nil {
		sum.Completed -= int(baseline) // rate mode counts every payment in the database
	}
	if sum.Completed < total {
		return nil, fmt.Errorf("only %d of %d payments completed (%+v)", sum.Completed, total, sum)
	}
	if err := p.CheckInvariants(ctx); err != nil {
		return nil, err
	}
	res := &PaymentsResult{
		Driver: drv.Name(), Payments: total, Completed: sum.Completed,
		ElapsedS:     round(elapsed.Seconds(), 3),
		PaymentsPerS: round(float64(total)/elapsed.Seconds(), 0),
		P50Ms:        round(sum.LatencyP50Ms, 1), P99Ms: round(sum.LatencyP99Ms, 1),
		Duplicates: sum.DuplicateSubmissions, Backlog: samples, Config: cfg, GoMaxProcs: runtime.GOMAXPROCS(0),
		AutovacuumOff: noAutovacuum,
	}
	if broker != nil {
		res.RelayClaims, res.EmptyRelayClaims = relayClaims(broker.metrics...)
	}
	return res, nil
}

// terminalCount counts the benchmark's finished payments and those parked for an operator.
func terminalCount(ctx context.Context, drv driver.Driver, typ string) (terminal, inTSQ int64, err error) {
	counts, err := drv.Executor().ExecutionCountByStatus(ctx)
	if err != nil {
		return 0, 0, err
	}
	for _, c := range counts {
		if c.Type != typ {
			continue
		}
		if c.Status.Terminal() {
			terminal += c.Count
		}
		if c.Status == driver.ExecutionWaitingForTSQ {
			inTSQ += c.Count
		}
	}
	return terminal, inTSQ, nil
}

// ratePairs are the currency pairs rate mode pays in, in turn: same-currency and FX payments.
var ratePairs = []struct{ currency, creditCurrency string }{
	{"USD", "USD"}, {"EUR", "EUR"}, {"GBP", "USD"}, {"CHF", "CHF"}, {"EUR", "JPY"}, {"USD", "GBP"}, {"JPY", "JPY"},
}

// rateRequest is rate mode's i-th payment: the next currency pair, from the pair's next debtor of
// cfg.Accounts to its next beneficiary.
func rateRequest(cfg PaymentsConfig, day string, i int) payments.PaymentRequest {
	a := ratePairs[i%len(ratePairs)]
	n := 1 + (i/len(ratePairs))%cfg.Accounts
	amount := "125.00"
	if a.currency == "JPY" {
		amount = "12500"
	}
	return payments.PaymentRequest{
		IdempotencyKey: fmt.Sprintf("bench-%s-%d", day, i),
		DebitAccount:   payments.CustomerAccountID(a.currency, n), CreditAccount: payments.BeneficiaryAccountID(a.creditCurrency, n),
		Amount: amount, Currency: a.currency, CreditCurrency: a.creditCurrency, ProcessType: cfg.ProcessType,
	}
}

// submitAtRate submits total payments through the API, paced at cfg.Rate per second, spread over
// the instances, sampling the backlog every second.
func submitAtRate(ctx context.Context, platforms []*payments.Platform, cfg PaymentsConfig, total int, day string,
	submitted *atomic.Int64, sample func(BacklogSample), start time.Time, drv driver.Driver, baseline int64) error {
	jobs := make(chan int)
	errs := make(chan error, 1)
	var wg sync.WaitGroup
	for w := range cfg.Submitters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := platforms[w%len(platforms)]
			for i := range jobs {
				_, err := p.SubmitPayment(ctx, rateRequest(cfg, day, i))
				if err != nil && !errors.Is(err, payments.ErrDuplicatePayment) {
					select {
					case errs <- err:
					default:
					}
					return
				}
				submitted.Add(1)
			}
		}()
	}
	interval := time.Duration(float64(time.Second) / cfg.Rate)
	next := time.Now()
	lastSample := time.Now()
	for i := 0; i < total; i++ {
		if d := time.Until(next); d > 0 {
			time.Sleep(d)
		}
		next = next.Add(interval)
		select {
		case jobs <- i:
		case err := <-errs:
			close(jobs)
			wg.Wait()
			return err
		case <-ctx.Done():
			close(jobs)
			wg.Wait()
			return ctx.Err()
		}
		if time.Since(lastSample) >= time.Second {
			lastSample = time.Now()
			terminal, _, err := terminalCount(ctx, drv, cfg.ProcessType)
			terminal -= baseline
			if err == nil {
				sample(BacklogSample{AtS: round(time.Since(start).Seconds(), 1), Submitted: submitted.Load(), Terminal: terminal, Backlog: submitted.Load() - terminal})
			}
		}
	}
	close(jobs)
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
	}
	return nil
}
