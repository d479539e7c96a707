package payments_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/config"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/examples/payments"
	"github.com/commandbus/commandbus/internal/clock"
)

// setupFromConfig starts a platform whose configuration is read as `commandbus serve` reads it:
// a YAML file overridden from the environment. The test adds a fake clock and fast pollers.
func setupFromConfig(t *testing.T, drv driver.Driver, yamlText string, environ []string) *fixture {
	t.Helper()
	file, err := config.Parse([]byte(yamlText), environ)
	require.NoError(t, err)
	cfg := &file.Config
	fake := clock.NewFake(testStart)
	ms := func(n int) commandbus.Duration { return commandbus.Duration(time.Duration(n) * time.Millisecond) }
	cfg.Clock = fake
	cfg.Logger = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	cfg.FetchPollInterval = ms(20)
	cfg.Domains = payments.DefaultDomainConfigs(4)
	cfg.Process.PendingPollInterval, cfg.Process.RetryPollInterval = ms(20), ms(20)
	cfg.Process.TimeoutCheckInterval, cfg.Process.DeadlineCheckInterval = ms(20), ms(20)
	client, err := commandbus.NewClient(drv, cfg)
	require.NoError(t, err)
	opts, err := payments.ConfigOptions(file)
	require.NoError(t, err)
	opts.DisableSimulator, opts.CustomersPerCurrency, opts.BeneficiariesPerCurrency = true, 3, 3
	p, err := payments.New(client, opts)
	require.NoError(t, err)
	require.NoError(t, client.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, client.Stop(ctx))
	})
	return &fixture{t: t, fake: fake, client: client, p: p}
}

// The command-steps entries of the configuration drive the reference processes: a step's domain
// and reply timeout, set in the file or from the environment (whose entries are named in lower
// case), change where a running payment sends the step's command and how long it waits for the
// reply. No handler works the configured domain, so the command waits there.
func TestCommandStepsConfigurationDrivesTheProcesses(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, processType, step, yaml string
		environ                       []string
	}{
		{name: "step process from the file", processType: payments.TypePaymentStep, step: payments.StepBookRisk,
			yaml: "commandbus:\n  command-steps:\n    bookRisk:\n      domain: risk-eu\n      command-type: BookRisk\n      timeout: 7m\n"},
		{name: "step process from the environment", processType: payments.TypePaymentStep, step: payments.StepBookRisk,
			environ: []string{"COMMANDBUS_COMMAND_STEPS_BOOKRISK_DOMAIN=risk-eu", "COMMANDBUS_COMMAND_STEPS_BOOKRISK_TIMEOUT=7m"}},
		{name: "process manager from the environment over the file", processType: payments.TypePaymentManager, step: payments.StepNameCheckBalance,
			yaml:    "command-steps:\n  STEP_CHECK_BALANCE:\n    domain: accounts-old\n    timeout: 1m\n",
			environ: []string{"COMMANDBUS_COMMAND_STEPS_STEP_CHECK_BALANCE_DOMAIN=risk-eu", "COMMANDBUS_COMMAND_STEPS_STEP_CHECK_BALANCE_TIMEOUT=PT7M"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			eachDriver(t, func(t *testing.T, drv driver.Driver) {
				f := setupFromConfig(t, drv, tc.yaml, tc.environ)
				ctx := context.Background()
				res := f.submit(domestic(tc.processType))
				var sent []*commandbus.CommandRow
				eventually(t, 20*time.Second, "the step's command in the configured domain", func() bool {
					var err error
					sent, err = f.client.ListCommands(ctx, &commandbus.ListParams{Domain: "risk-eu"})
					require.NoError(t, err)
					return len(sent) == 1
				})
				require.Equal(t, res.ExecutionID, sent[0].CorrelationID)
				v := f.waitWaiting(res.PaymentID, tc.step)
				require.NotNil(t, v.WaitTimeoutAt)
				require.WithinDuration(t, testStart.Add(7*time.Minute), *v.WaitTimeoutAt, time.Second,
					"the wait for the reply uses the configured timeout")

				// Past the default reply timeout the payment still waits; past the configured one
				// it times out.
				f.fake.Advance(commandbus.DefaultCommandStepTimeout + time.Second)
				require.Equal(t, "WAITING", f.waitWaiting(res.PaymentID, tc.step).Status)
				f.fake.Advance(5 * time.Minute)
				v = f.waitStatus(res.PaymentID, "IN_TSQ")
				require.Equal(t, "WAIT_TIMEOUT", v.ErrorCode)
			})
		})
	}
}

// Without command-steps entries a step waits for its reply longer than its command can take
// when the workers of all its attempts are killed, so a killed worker never parks a payment.
func TestDefaultReplyWaitOutlastsRedelivery(t *testing.T) {
	t.Parallel()
	eachDriver(t, func(t *testing.T, drv driver.Driver) {
		f := setupFromConfig(t, drv, "", nil)
		req := domestic(payments.TypePaymentStep)
		// The submission fails transiently and waits for a retry the fake clock never reaches, so
		// the payment stays waiting on its reply (a quick reply would leave a window a poll can miss).
		req.Behavior = &payments.Behavior{Name: "network busy", Steps: map[string]payments.StepBehavior{
			payments.StepSubmitPayment: {FailTransientPct: 100}}}
		res := f.submit(req)
		v := f.waitWaiting(res.PaymentID, payments.StepSubmitPayment)
		require.NotNil(t, v.WaitTimeoutAt)
		window := f.client.Config().Domain(payments.DomainPayments).RedeliveryWindow()
		require.False(t, v.WaitTimeoutAt.Before(testStart.Add(window)),
			"the reply wait (until %s) must outlast the redelivery window (%s)", v.WaitTimeoutAt, window)
	})
}

// payments.max-amounts bounds payments per currency from the configuration file, read case-
// insensitively, and the environment can add or change a bound.
func TestMaxAmountsFromConfiguration(t *testing.T) {
	t.Parallel()
	cfg, err := config.Parse([]byte("payments:\n  max-amounts:\n    GBP: \"1000.00\"\n"),
		[]string{"COMMANDBUS_PAYMENTS_MAX_AMOUNTS_EUR=500"})
	require.NoError(t, err)
	opts, err := payments.ConfigOptions(cfg)
	require.NoError(t, err)
	require.Equal(t, map[string]decimal.Decimal{"GBP": decimal.RequireFromString("1000.00"), "EUR": decimal.RequireFromString("500")}, opts.MaxAmounts)

	opts, err = payments.ConfigOptions(&config.File{FX: config.FXConfig{URL: "http://fx.internal:8081"}})
	require.NoError(t, err)
	require.Equal(t, "http://fx.internal:8081", opts.FXAPIURL, "fx.url is an option of the file too")

	_, err = payments.ConfigOptions(&config.File{Payments: config.PaymentsConfig{MaxAmounts: map[string]string{"XYZ": "10"}}})
	require.ErrorContains(t, err, "XYZ, which the platform does not support")

	eachDriver(t, func(t *testing.T, drv driver.Driver) {
		f := setupFromConfig(t, drv, "payments:\n  max-amounts:\n    gbp: \"1000.00\"\n", nil)
		req := domestic(payments.TypePaymentStep)
		req.Amount, req.IdempotencyKey = "1000.01", "over-the-bound"
		_, err := f.p.SubmitPayment(context.Background(), req)
		var verr *commandbus.ValidationError
		require.True(t, errors.As(err, &verr), "want a validation error, got %v", err)
		require.Equal(t, "amount", verr.Field)
		req.Amount, req.IdempotencyKey = "1000.00", "at-the-bound"
		f.submit(req)
	})
}
