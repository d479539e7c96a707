package config_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/config"
)

// referenceApplicationYAML is the reference application.yml, wrapped under commandbus:.
const referenceApplicationYAML = `
commandbus:
  # Global feature toggles - what this worker instance does
  features:
    command-handlers: true      # Process commands via handlers
    process-execution: true     # Run ProcessStepManager workflows
    reply-processing: true      # Handle replies from other domains

  # Per-domain settings - which domains and their concurrency
  domains:
    fx:
      enabled: true
      concurrent-messages: 2    # Max 2 concurrent FX API calls per instance
    risk:
      enabled: true
      concurrent-messages: 3    # Max 3 concurrent Risk API calls per instance
    payments:
      enabled: true
      concurrent-messages: 10   # Higher for general processing

  # Command step mappings (for ProcessStepManager.commandStep())
  command-steps:
    bookFx:
      domain: fx
      command-type: BookFx
      timeout: 30s
    bookRisk:
      domain: risk
      command-type: BookRisk
      timeout: 30s
`

// mustParseConfig parses a configuration that must be valid.
func mustParseConfig(t *testing.T, yamlText string, environ ...string) *config.File {
	t.Helper()
	cfg, err := config.Parse([]byte(yamlText), environ)
	require.NoError(t, err)
	require.NotNil(t, cfg)
	return cfg
}

// parseConfigError parses a configuration that must be invalid and returns its commandbus.ConfigError.
func parseConfigError(t *testing.T, yamlText string, environ ...string) *commandbus.ConfigError {
	t.Helper()
	cfg, err := config.Parse([]byte(yamlText), environ)
	require.Error(t, err)
	require.Nil(t, cfg)
	require.ErrorIs(t, err, commandbus.ErrInvalidConfig)
	var invalid *commandbus.ConfigError
	require.ErrorAs(t, err, &invalid)
	return invalid
}

func TestParseConfigReferenceExample(t *testing.T) {
	t.Parallel()

	cfg := mustParseConfig(t, referenceApplicationYAML)

	require.Equal(t, commandbus.Features{
		CommandHandlers:  boolPtr(true),
		ProcessExecution: boolPtr(true),
		ReplyProcessing:  boolPtr(true),
	}, cfg.Features)
	require.Equal(t, map[string]*commandbus.DomainConfig{
		"fx":       {Enabled: boolPtr(true), ConcurrentMessages: 2},
		"risk":     {Enabled: boolPtr(true), ConcurrentMessages: 3},
		"payments": {Enabled: boolPtr(true), ConcurrentMessages: 10},
	}, cfg.Domains)
	require.Equal(t, map[string]*commandbus.CommandStepConfig{
		"bookFx":   {Domain: "fx", CommandType: "BookFx", Timeout: commandbus.Duration(30 * time.Second)},
		"bookRisk": {Domain: "risk", CommandType: "BookRisk", Timeout: commandbus.Duration(30 * time.Second)},
	}, cfg.CommandSteps)
}

func TestParseConfigWrappedAndUnwrapped(t *testing.T) {
	t.Parallel()

	want := &config.File{Config: commandbus.Config{
		Features: commandbus.Features{ProcessExecution: boolPtr(false)},
		Domains:  map[string]*commandbus.DomainConfig{"fx": {ConcurrentMessages: 2}},
	}}
	tests := []struct {
		name string
		yaml string
		want *config.File
	}{
		{
			name: "wrapped",
			yaml: "commandbus:\n  features:\n    process-execution: false\n  domains:\n    fx:\n      concurrent-messages: 2\n",
			want: want,
		},
		{
			name: "unwrapped",
			yaml: "features:\n  process-execution: false\ndomains:\n  fx:\n    concurrent-messages: 2\n",
			want: want,
		},
		{name: "empty file", yaml: "", want: &config.File{}},
		{name: "comments only", yaml: "# nothing configured yet\n", want: &config.File{}},
		{name: "empty wrapper", yaml: "commandbus:\n", want: &config.File{}},
		{name: "explicit document start", yaml: "---\nfeatures: {}\n", want: &config.File{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()

			require.Equal(t, tt.want, mustParseConfig(t, tt.yaml))
		})
	}
}

func TestParseConfigReturnsWithoutDefaults(t *testing.T) {
	t.Parallel()

	cfg := mustParseConfig(t, "domains:\n  fx:\n  risk:\n    concurrent-messages: 3\n")

	require.Nil(t, cfg.Features.CommandHandlers)
	require.NotNil(t, cfg.Domains["fx"], "an entry without settings is present, not nil")
	require.Zero(t, cfg.Domains["fx"].ConcurrentMessages)
	require.Zero(t, cfg.Process.DefaultWaitTimeout)

	withDefaults := cfg.WithDefaults()
	require.Equal(t, commandbus.DefaultConcurrentMessages, withDefaults.Domains["fx"].ConcurrentMessages)
	require.Equal(t, 3, withDefaults.Domains["risk"].ConcurrentMessages)
	require.Equal(t, boolPtr(true), withDefaults.Features.CommandHandlers)
	require.Zero(t, cfg.Domains["fx"].ConcurrentMessages, "WithDefaults leaves the parsed config alone")
}

func TestParseConfigAllKeys(t *testing.T) {
	t.Parallel()

	cfg := mustParseConfig(t, `
features:
  command-handlers: false
domains:
  fx:
    enabled: true
    concurrent-messages: 2
    reply-concurrent-messages: 4
    visibility-timeout: PT1M
    max-attempts: 7
    fetch-batch: 50
    retry:
      initial-delay: 500
      max-delay: 2m
      multiplier: 1.5
      jitter: 0
process:
  pending-poll-interval: 1000
  retry-poll-interval: 5000
  timeout-check-interval: PT1M
  deadline-check-interval: 90s
  default-wait-timeout: PT2H
  execution-lease: PT30S
  concurrent-executions: 20
  retention: P30D
  retention-interval: 10m
  types:
    payment:
      default-wait-timeout: P1D
      deadline-action: COMPENSATE
database:
  url: postgres://commandbus@localhost/commandbus
  schema: bus
server:
  addr: 0.0.0.0:9090
  tokens:
    - subject: alice
      token: 0123456789abcdef0123
      role: operator
  read-header-timeout: 5s
  read-timeout: PT20S
  write-timeout: 2m
  idle-timeout: 90s
fetch-cooldown: 10ms
fetch-poll-interval: 2s
shutdown-timeout: PT45S
`)

	require.Equal(t, boolPtr(false), cfg.Features.CommandHandlers)
	zero := 0.0
	require.Equal(t, &commandbus.DomainConfig{
		Enabled:                 boolPtr(true),
		ConcurrentMessages:      2,
		ReplyConcurrentMessages: 4,
		VisibilityTimeout:       commandbus.Duration(time.Minute),
		MaxAttempts:             7,
		FetchBatch:              50,
		Retry: commandbus.RetryPolicy{
			InitialDelay: commandbus.Duration(500 * time.Millisecond),
			MaxDelay:     commandbus.Duration(2 * time.Minute),
			Multiplier:   1.5,
			Jitter:       &zero,
		},
	}, cfg.Domains["fx"])
	require.Equal(t, commandbus.ProcessConfig{
		PendingPollInterval:   commandbus.Duration(time.Second),
		RetryPollInterval:     commandbus.Duration(5 * time.Second),
		TimeoutCheckInterval:  commandbus.Duration(time.Minute),
		DeadlineCheckInterval: commandbus.Duration(90 * time.Second),
		DefaultWaitTimeout:    commandbus.Duration(2 * time.Hour),
		ExecutionLease:        commandbus.Duration(30 * time.Second),
		ConcurrentExecutions:  20,
		Retention:             commandbus.Duration(30 * 24 * time.Hour),
		RetentionInterval:     commandbus.Duration(10 * time.Minute),
		Types: map[string]*commandbus.ProcessTypeConfig{
			"payment": {DefaultWaitTimeout: commandbus.Duration(24 * time.Hour), DeadlineAction: "COMPENSATE"},
		},
	}, cfg.Process)
	require.Equal(t, config.DatabaseConfig{URL: "postgres://commandbus@localhost/commandbus", Schema: "bus"}, cfg.Database)
	require.Equal(t, config.ServerConfig{
		Addr:              "0.0.0.0:9090",
		Tokens:            []config.TokenConfig{{Subject: "alice", Token: "0123456789abcdef0123", Role: "operator"}},
		ReadHeaderTimeout: commandbus.Duration(5 * time.Second),
		ReadTimeout:       commandbus.Duration(20 * time.Second),
		WriteTimeout:      commandbus.Duration(2 * time.Minute),
		IdleTimeout:       commandbus.Duration(90 * time.Second),
	}, cfg.Server)
	require.Equal(t, commandbus.Duration(10*time.Millisecond), cfg.FetchCooldown)
	require.Equal(t, commandbus.Duration(2*time.Second), cfg.FetchPollInterval)
	require.Equal(t, commandbus.Duration(45*time.Second), cfg.ShutdownTimeout)
}

func TestParseConfigAnchorsAndMergeKeys(t *testing.T) {
	t.Parallel()

	cfg := mustParseConfig(t, `
domains:
  fx: &rate-limited
    concurrent-messages: 2
    retry:
      max-delay: 1m
  risk:
    <<: *rate-limited
    concurrent-messages: 3
  payments: *rate-limited
`)

	require.Equal(t, 2, cfg.Domains["fx"].ConcurrentMessages)
	require.Equal(t, 3, cfg.Domains["risk"].ConcurrentMessages, "a written key overrides a merged one")
	require.Equal(t, commandbus.Duration(time.Minute), cfg.Domains["risk"].Retry.MaxDelay)
	require.Equal(t, 2, cfg.Domains["payments"].ConcurrentMessages)
	require.NotSame(t, cfg.Domains["fx"], cfg.Domains["payments"], "an alias gives an entry of its own")

	t.Run("list of merged mappings", func(t *testing.T) {
		t.Parallel()

		cfg := mustParseConfig(t, `
domains:
  fx: &small
    concurrent-messages: 2
    max-attempts: 5
  risk: &slow
    concurrent-messages: 3
    visibility-timeout: 2m
  payments:
    <<: [*small, *slow, *small]
`)
		payments := cfg.Domains["payments"]
		require.Equal(t, 2, payments.ConcurrentMessages, "an earlier merged mapping overrides a later one")
		require.Equal(t, 5, payments.MaxAttempts)
		require.Equal(t, commandbus.Duration(2*time.Minute), payments.VisibilityTimeout)
	})

	t.Run("list with a value", func(t *testing.T) {
		t.Parallel()

		invalid := parseConfigError(t, "domains:\n  fx: &small\n    concurrent-messages: 2\n  risk:\n    <<: [*small, 3]\n")
		require.ErrorContains(t, invalid, `line 5: domains.risk: a merge key (<<) takes a mapping or a list of mappings, got "3"`)
	})
}

func TestParseConfigFileProblems(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name    string
		yaml    string
		wantErr string
	}{
		{
			name:    "unknown top-level key",
			yaml:    "featurez:\n  command-handlers: true\n",
			wantErr: `line 1: unknown key "featurez" (known keys: features, domains, command-steps, process, amqp, amqp10, kafka, events, lifecycle-events, lifecycle-events-topic, lifecycle-events-exchange, webhooks, outbox, watchdog-interval, fetch-cooldown, fetch-poll-interval, shutdown-timeout, database, server, simulator, payments, fx, tracing, tenants)`,
		},
		{
			name:    "unknown nested key",
			yaml:    "domains:\n  fx:\n    concurent-messages: 2\n",
			wantErr: `line 3: domains.fx: unknown key "concurent-messages" (known keys: enabled, concurrent-messages,`,
		},
		{
			name:    "Java-style key",
			yaml:    "features:\n  commandHandlers: true\n",
			wantErr: `line 2: features: unknown key "commandHandlers"`,
		},
		{
			name:    "key hidden by yaml:\"-\"",
			yaml:    "worker-id: w1\n",
			wantErr: `line 1: unknown key "worker-id"`,
		},
		{
			name:    "text for an integer",
			yaml:    "domains:\n  fx:\n    concurrent-messages: two\n",
			wantErr: `line 3: domains.fx.concurrent-messages: cannot read "two" as an integer`,
		},
		{
			name:    "quoted integer",
			yaml:    "domains:\n  fx:\n    concurrent-messages: \"2\"\n",
			wantErr: `line 3: domains.fx.concurrent-messages: cannot read "2" as an integer; remove the quotes`,
		},
		{
			name:    "text for a boolean",
			yaml:    "features:\n  process-execution: maybe\n",
			wantErr: `line 2: features.process-execution: cannot read "maybe" as true or false`,
		},
		{
			name:    "text for a number",
			yaml:    "domains:\n  fx:\n    retry:\n      jitter: lots\n",
			wantErr: `line 4: domains.fx.retry.jitter: cannot read "lots" as a number`,
		},
		{
			name:    "bad duration",
			yaml:    "process:\n  default-wait-timeout: soon\n",
			wantErr: `line 2: process.default-wait-timeout: duration "soon": use a Go duration (30s, 5m), ISO-8601 (PT1H) or milliseconds (1000)`,
		},
		{
			name:    "mapping for a value",
			yaml:    "database:\n  url:\n    host: localhost\n",
			wantErr: `line 3: database.url: want a string, got a mapping`,
		},
		{
			name:    "value for a section",
			yaml:    "features: all\n",
			wantErr: `line 1: features: want a mapping with keys command-handlers, process-execution, reply-processing, got "all"`,
		},
		{
			name:    "list for the domains",
			yaml:    "domains:\n  - fx\n",
			wantErr: `line 2: domains: want a mapping of names to settings, got a list`,
		},
		{
			name:    "mapping for the tokens",
			yaml:    "server:\n  tokens:\n    alice: secret\n",
			wantErr: `line 3: server.tokens: want a list, got a mapping`,
		},
		{
			name:    "unknown key in a list item",
			yaml:    "server:\n  tokens:\n    - subject: alice\n      token: 0123456789abcdef\n      role: operator\n      scope: all\n",
			wantErr: `line 6: server.tokens[0]: unknown key "scope"`,
		},
		{
			name:    "key written twice",
			yaml:    "domains:\n  fx:\n    concurrent-messages: 2\n    concurrent-messages: 3\n",
			wantErr: `line 4: domains.fx: key "concurrent-messages" is already written on line 3`,
		},
		{
			name:    "domain written twice",
			yaml:    "domains:\n  fx: {}\n  fx: {}\n",
			wantErr: `line 3: domains: key "fx" is already written on line 2`,
		},
		{
			name:    "key beside the wrapper",
			yaml:    "spring:\n  profiles: worker\ncommandbus:\n  domains:\n    fx: {}\n",
			wantErr: `line 1: unknown key "spring" beside commandbus: (a wrapped configuration holds only the commandbus key)`,
		},
		{
			name:    "wrapper written twice",
			yaml:    "commandbus:\n  domains: {}\ncommandbus:\n  features: {}\n",
			wantErr: `line 3: key "commandbus" is already written on line 1`,
		},
		{
			name:    "two documents",
			yaml:    "domains: {}\n---\nfeatures: {}\n",
			wantErr: "a configuration file holds one YAML document",
		},
		{
			name:    "top level is a list",
			yaml:    "- fx\n- risk\n",
			wantErr: "line 1: want a mapping with keys features, domains,",
		},
		{
			name:    "YAML syntax error",
			yaml:    "domains:\n\tfx: {}\n",
			wantErr: "line 2: found character that cannot start any token",
		},
		{
			name:    "merge of a value",
			yaml:    "domains:\n  fx:\n    <<: 3\n",
			wantErr: `line 3: domains.fx: a merge key (<<) takes a mapping or a list of mappings, got "3"`,
		},
		{
			name:    "invalid value caught by Validate",
			yaml:    "domains:\n  fx:\n    retry:\n      jitter: 1.5\n",
			wantErr: "domains.fx.retry.jitter: must be between 0 and 1, got 1.5",
		},
		{
			name:    "command step with an invalid domain",
			yaml:    "command-steps:\n  bookFx:\n    domain: FX!\n",
			wantErr: `command-steps.bookFx.domain: "FX!" is not a valid domain name`,
		},
		{
			name:    "process type written twice",
			yaml:    "process:\n  types:\n    payment: {deadline-action: TSQ}\n  payment:\n    deadline-action: FAIL\n",
			wantErr: `line 4: process: "payment" is also written under process.types; write it once`,
		},
		{
			name:    "scalar typo under process is still unknown",
			yaml:    "process:\n  pending-pol-interval: 5s\n",
			wantErr: `line 2: process: unknown key "pending-pol-interval"`,
		},
		{
			name:    "max amount in exponent notation",
			yaml:    "payments:\n  max-amounts:\n    USD: 1e7\n",
			wantErr: `payments.max-amounts.USD: want a plain positive decimal such as 10000000.00, got "1e7"`,
		},
		{
			name:    "max amount of zero",
			yaml:    "payments:\n  max-amounts:\n    USD: \"0.00\"\n",
			wantErr: `payments.max-amounts.USD: must be positive, got "0.00"`,
		},
		{
			name:    "max amount for no currency",
			yaml:    "payments:\n  max-amounts:\n    DOLLARS: \"5\"\n",
			wantErr: `payments.max-amounts.DOLLARS: not a currency code`,
		},
		{
			name:    "negative log cache",
			yaml:    "process:\n  log-cache: -5\n",
			wantErr: "process.log-cache: must be -1 (off), 0 (the default) or a number of executions, got -5",
		},
		{
			name:    "negative execution retention",
			yaml:    "process:\n  retention: -1h\n",
			wantErr: `process.retention: duration "-1h" must not be negative`,
		},
		{
			name:    "negative retention interval",
			yaml:    "process:\n  retention-interval: -1s\n",
			wantErr: `process.retention-interval: duration "-1s" must not be negative`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()

			invalid := parseConfigError(t, tt.yaml)
			require.ErrorContains(t, invalid, tt.wantErr)
		})
	}
}

func TestParseConfigReportsEveryProblemAtOnce(t *testing.T) {
	t.Parallel()

	invalid := parseConfigError(t, `
commandbus:
  features:
    command-handlerz: true
  domains:
    fx:
      concurrent-messages: -2
      visibility-timeout: soon
  process:
    types:
      payment:
        deadline-action: RETRY
`, "COMMANDBUS_DOMAINS_FX_MAX_ATTEMPTS=three", "COMMANDBUS_FEATURES_REPLY_PROCESING=true")

	wantProblems := []string{
		`line 4: features: unknown key "command-handlerz"`,
		`line 8: domains.fx.visibility-timeout: duration "soon"`,
		`COMMANDBUS_DOMAINS_FX_MAX_ATTEMPTS: domains.fx.max-attempts: cannot read "three" as an integer`,
		`COMMANDBUS_FEATURES_REPLY_PROCESING: features has no key REPLY_PROCESING`,
		`domains.fx.concurrent-messages: must be at least 1, got -2`,
		// reply-concurrent-messages defaults to concurrent-messages, so Validate reports it too.
		`domains.fx.reply-concurrent-messages: must be at least 1, got -2`,
		`process.types.payment.deadline-action: must be TSQ, COMPENSATE or FAIL, got "RETRY"`,
	}
	require.Len(t, invalid.Problems, len(wantProblems), invalid.Error())
	for i, want := range wantProblems {
		require.ErrorContains(t, invalid.Problems[i], want)
		require.Contains(t, invalid.Error(), want, "the message lists every problem")
	}
	require.Contains(t, invalid.Error(), "invalid configuration (7 problems)")
}

func TestParseConfigEnvOverrides(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name    string
		yaml    string
		environ []string
		check   func(t *testing.T, cfg *config.File)
	}{
		{
			name:    "domain concurrency",
			environ: []string{"COMMANDBUS_DOMAINS_FX_CONCURRENT_MESSAGES=2"},
			check: func(t *testing.T, cfg *config.File) {
				require.Equal(t, 2, cfg.Domains["fx"].ConcurrentMessages)
			},
		},
		{
			name:    "feature switch",
			environ: []string{"COMMANDBUS_FEATURES_PROCESS_EXECUTION=false"},
			check: func(t *testing.T, cfg *config.File) {
				require.Equal(t, boolPtr(false), cfg.Features.ProcessExecution)
				require.Nil(t, cfg.Features.CommandHandlers, "other features keep their default")
			},
		},
		{
			name:    "command step timeout matches its name ignoring case",
			yaml:    referenceApplicationYAML,
			environ: []string{"COMMANDBUS_COMMAND_STEPS_BOOKFX_TIMEOUT=45s"},
			check: func(t *testing.T, cfg *config.File) {
				require.Equal(t, commandbus.Duration(45*time.Second), cfg.CommandSteps["bookFx"].Timeout)
				require.Equal(t, "BookFx", cfg.CommandSteps["bookFx"].CommandType)
				require.Len(t, cfg.CommandSteps, 2, "no bookfx entry is created")
			},
		},
		{
			name:    "ISO-8601 duration",
			environ: []string{"COMMANDBUS_PROCESS_DEFAULT_WAIT_TIMEOUT=PT2H"},
			check: func(t *testing.T, cfg *config.File) {
				require.Equal(t, commandbus.Duration(2*time.Hour), cfg.Process.DefaultWaitTimeout)
			},
		},
		{
			name:    "millisecond duration",
			environ: []string{"COMMANDBUS_PROCESS_PENDING_POLL_INTERVAL=250"},
			check: func(t *testing.T, cfg *config.File) {
				require.Equal(t, commandbus.Duration(250*time.Millisecond), cfg.Process.PendingPollInterval)
			},
		},
		{
			name:    "database URL",
			environ: []string{"COMMANDBUS_DATABASE_URL=postgres://user:pass@db:5432/app?sslmode=disable"},
			check: func(t *testing.T, cfg *config.File) {
				require.Equal(t, "postgres://user:pass@db:5432/app?sslmode=disable", cfg.Database.URL)
			},
		},
		{
			name:    "top-level key",
			environ: []string{"COMMANDBUS_FETCH_POLL_INTERVAL=PT5S", "COMMANDBUS_SHUTDOWN_TIMEOUT=1m"},
			check: func(t *testing.T, cfg *config.File) {
				require.Equal(t, commandbus.Duration(5*time.Second), cfg.FetchPollInterval)
				require.Equal(t, commandbus.Duration(time.Minute), cfg.ShutdownTimeout)
			},
		},
		{
			name:    "pointer to a number",
			environ: []string{"COMMANDBUS_DOMAINS_FX_RETRY_JITTER=0.5", "COMMANDBUS_DOMAINS_FX_RETRY_MAX_DELAY=PT10M"},
			check: func(t *testing.T, cfg *config.File) {
				jitter := 0.5
				require.Equal(t, &jitter, cfg.Domains["fx"].Retry.Jitter)
				require.Equal(t, commandbus.Duration(10*time.Minute), cfg.Domains["fx"].Retry.MaxDelay)
			},
		},
		{
			name:    "new domain is created lower-case",
			yaml:    "domains:\n  fx:\n    concurrent-messages: 2\n",
			environ: []string{"COMMANDBUS_DOMAINS_RISK_ENABLED=false"},
			check: func(t *testing.T, cfg *config.File) {
				require.Equal(t, &commandbus.DomainConfig{Enabled: boolPtr(false)}, cfg.Domains["risk"])
				require.Equal(t, 2, cfg.Domains["fx"].ConcurrentMessages)
			},
		},
		{
			name:    "domain name with a dash",
			yaml:    "domains:\n  fx-spot:\n    concurrent-messages: 2\n",
			environ: []string{"COMMANDBUS_DOMAINS_FX_SPOT_CONCURRENT_MESSAGES=4"},
			check: func(t *testing.T, cfg *config.File) {
				require.Equal(t, 4, cfg.Domains["fx-spot"].ConcurrentMessages)
				require.Len(t, cfg.Domains, 1)
			},
		},
		{
			name:    "new domain name spanning segments",
			environ: []string{"COMMANDBUS_DOMAINS_FX_SPOT_VISIBILITY_TIMEOUT=1m"},
			check: func(t *testing.T, cfg *config.File) {
				require.Equal(t, commandbus.Duration(time.Minute), cfg.Domains["fx_spot"].VisibilityTimeout)
			},
		},
		{
			name:    "shortest new name when a key ends another",
			environ: []string{"COMMANDBUS_DOMAINS_FX_REPLY_CONCURRENT_MESSAGES=4"},
			check: func(t *testing.T, cfg *config.File) {
				require.Equal(t, 4, cfg.Domains["fx"].ReplyConcurrentMessages)
				require.NotContains(t, cfg.Domains, "fx_reply")
			},
		},
		{
			name:    "existing entry wins over a shorter new name",
			yaml:    "domains:\n  fx-reply:\n    concurrent-messages: 1\n",
			environ: []string{"COMMANDBUS_DOMAINS_FX_REPLY_CONCURRENT_MESSAGES=4"},
			check: func(t *testing.T, cfg *config.File) {
				require.Equal(t, 4, cfg.Domains["fx-reply"].ConcurrentMessages)
				require.NotContains(t, cfg.Domains, "fx")
			},
		},
		{
			name:    "process type",
			yaml:    "process:\n  types:\n    Payment-Flow:\n      deadline-action: TSQ\n",
			environ: []string{"COMMANDBUS_PROCESS_TYPES_PAYMENT_FLOW_DEADLINE_ACTION=FAIL"},
			check: func(t *testing.T, cfg *config.File) {
				require.Equal(t, "FAIL", cfg.Process.Types["Payment-Flow"].DeadlineAction)
			},
		},
		{
			name: "new command step",
			environ: []string{
				"COMMANDBUS_COMMAND_STEPS_BOOKFX_DOMAIN=fx",
				"COMMANDBUS_COMMAND_STEPS_BOOKFX_COMMAND_TYPE=BookFx",
			},
			check: func(t *testing.T, cfg *config.File) {
				require.Equal(t, &commandbus.CommandStepConfig{Domain: "fx", CommandType: "BookFx"}, cfg.CommandSteps["bookfx"])
			},
		},
		{
			name:    "boolean forms of strconv",
			environ: []string{"COMMANDBUS_FEATURES_COMMAND_HANDLERS=1", "COMMANDBUS_FEATURES_REPLY_PROCESSING=FALSE"},
			check: func(t *testing.T, cfg *config.File) {
				require.Equal(t, boolPtr(true), cfg.Features.CommandHandlers)
				require.Equal(t, boolPtr(false), cfg.Features.ReplyProcessing)
			},
		},
		{
			name: "other variables are ignored",
			environ: []string{
				"COMMANDBUS_TEST_DATABASE_URL=postgres://localhost/test",
				"COMMANDBUS_REQUIRE_POSTGRES=1",
				"COMMANDBUS_FEATURE_TYPO=1", // not below a known section: cannot be told from another tool's
				"DOMAINS_FX_CONCURRENT_MESSAGES=7",
				"commandbus_domains_fx_concurrent_messages=7",
				"PATH=/usr/bin",
				"MALFORMED",
			},
			check: func(t *testing.T, cfg *config.File) {
				require.Equal(t, &config.File{}, cfg)
			},
		},
		{
			name:    "a later duplicate wins",
			environ: []string{"COMMANDBUS_DOMAINS_FX_CONCURRENT_MESSAGES=2", "COMMANDBUS_DOMAINS_FX_CONCURRENT_MESSAGES=3"},
			check: func(t *testing.T, cfg *config.File) {
				require.Equal(t, 3, cfg.Domains["fx"].ConcurrentMessages)
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()

			tt.check(t, mustParseConfig(t, tt.yaml, tt.environ...))
		})
	}
}

func TestParseConfigEnvOverridesFile(t *testing.T) {
	t.Parallel()

	yamlText := `
commandbus:
  features:
    process-execution: true
  domains:
    fx:
      enabled: true
      concurrent-messages: 5
      visibility-timeout: 30s
  database:
    url: postgres://file/db
`
	cfg := mustParseConfig(t, yamlText,
		"COMMANDBUS_FEATURES_PROCESS_EXECUTION=false",
		"COMMANDBUS_DOMAINS_FX_CONCURRENT_MESSAGES=2",
		"COMMANDBUS_DATABASE_URL=postgres://env/db",
	)

	require.Equal(t, boolPtr(false), cfg.Features.ProcessExecution)
	require.Equal(t, 2, cfg.Domains["fx"].ConcurrentMessages)
	require.Equal(t, "postgres://env/db", cfg.Database.URL)
	require.Equal(t, boolPtr(true), cfg.Domains["fx"].Enabled, "keys without a variable keep the file's value")
	require.Equal(t, commandbus.Duration(30*time.Second), cfg.Domains["fx"].VisibilityTimeout)
}

func TestParseConfigEnvProblems(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name    string
		yaml    string
		environ []string
		wantErr string
	}{
		{
			name:    "typo in a field",
			environ: []string{"COMMANDBUS_DOMAINS_FX_CONCURENT_MESSAGES=2"},
			wantErr: "COMMANDBUS_DOMAINS_FX_CONCURENT_MESSAGES: domains.fx has no key CONCURENT_MESSAGES (known keys: enabled, concurrent-messages,",
		},
		{
			name:    "typo in a feature",
			environ: []string{"COMMANDBUS_FEATURES_PROCESS_EXECUTIONS=false"},
			wantErr: "COMMANDBUS_FEATURES_PROCESS_EXECUTIONS: features has no key PROCESS_EXECUTIONS",
		},
		{
			name:    "key below a value",
			environ: []string{"COMMANDBUS_DATABASE_URL_HOST=db"},
			wantErr: "COMMANDBUS_DATABASE_URL_HOST: database.url has no key HOST",
		},
		{
			name:    "typo below a top-level key",
			environ: []string{"COMMANDBUS_SHUTDOWN_TIMEOUT_SECONDS=30"},
			wantErr: "COMMANDBUS_SHUTDOWN_TIMEOUT_SECONDS: shutdown-timeout has no key SECONDS",
		},
		{
			name:    "a section, not a key",
			environ: []string{"COMMANDBUS_DOMAINS_FX=2"},
			wantErr: "COMMANDBUS_DOMAINS_FX: names the section domains.fx, not a key in it",
		},
		{
			name:    "the whole section",
			environ: []string{"COMMANDBUS_FEATURES=all"},
			wantErr: "COMMANDBUS_FEATURES: names the section features, not a key in it",
		},
		{
			name:    "a list that is not a YAML sequence",
			environ: []string{"COMMANDBUS_SERVER_TOKENS=alice:secret"},
			wantErr: "COMMANDBUS_SERVER_TOKENS: server.tokens: want a list, got",
		},
		{
			name:    "a list's item has no variable of its own",
			environ: []string{"COMMANDBUS_SERVER_TOKENS_0_ROLE=viewer"},
			wantErr: "COMMANDBUS_SERVER_TOKENS_0_ROLE: server.tokens is a list, set whole as a YAML sequence",
		},
		{
			name:    "bad integer",
			environ: []string{"COMMANDBUS_DOMAINS_FX_CONCURRENT_MESSAGES=two"},
			wantErr: `COMMANDBUS_DOMAINS_FX_CONCURRENT_MESSAGES: domains.fx.concurrent-messages: cannot read "two" as an integer`,
		},
		{
			name:    "bad boolean",
			environ: []string{"COMMANDBUS_FEATURES_PROCESS_EXECUTION=nope"},
			wantErr: `COMMANDBUS_FEATURES_PROCESS_EXECUTION: features.process-execution: cannot read "nope" as true or false`,
		},
		{
			name:    "bad number",
			environ: []string{"COMMANDBUS_DOMAINS_FX_RETRY_MULTIPLIER=double"},
			wantErr: `COMMANDBUS_DOMAINS_FX_RETRY_MULTIPLIER: domains.fx.retry.multiplier: cannot read "double" as a number`,
		},
		{
			name:    "bad duration",
			environ: []string{"COMMANDBUS_PROCESS_DEFAULT_WAIT_TIMEOUT=2 hours"},
			wantErr: `COMMANDBUS_PROCESS_DEFAULT_WAIT_TIMEOUT: process.default-wait-timeout: duration "2 hours"`,
		},
		{
			name:    "empty value for an integer",
			environ: []string{"COMMANDBUS_DOMAINS_FX_MAX_ATTEMPTS="},
			wantErr: `COMMANDBUS_DOMAINS_FX_MAX_ATTEMPTS: domains.fx.max-attempts: cannot read "" as an integer`,
		},
		{
			name:    "entries alike but for their separator",
			yaml:    "domains:\n  fx-a: {}\n  fx_a: {}\n",
			environ: []string{"COMMANDBUS_DOMAINS_FX_A_ENABLED=false"},
			wantErr: "COMMANDBUS_DOMAINS_FX_A_ENABLED: ambiguous: could set domains.fx",
		},
		{
			name:    "value valid to parse, invalid to use",
			environ: []string{"COMMANDBUS_DOMAINS_FX_CONCURRENT_MESSAGES=-1"},
			wantErr: "domains.fx.concurrent-messages: must be at least 1, got -1",
		},
		{
			name:    "new entry with an invalid domain name",
			environ: []string{"COMMANDBUS_DOMAINS_FX__SPOT_ENABLED=true"},
			wantErr: `domains.fx__spot: domain name must be lower-case letters`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()

			invalid := parseConfigError(t, tt.yaml, tt.environ...)
			require.ErrorContains(t, invalid, tt.wantErr)
		})
	}
}

func TestLoadConfigMissingFile(t *testing.T) {
	t.Parallel()

	path := filepath.Join(t.TempDir(), "absent.yml")
	cfg, err := config.Load(path)
	require.Nil(t, cfg)
	require.ErrorIs(t, err, fs.ErrNotExist)
	require.ErrorContains(t, err, path)
}

func TestLoadConfigInvalidFileNamesPath(t *testing.T) {
	t.Parallel()

	path := filepath.Join(t.TempDir(), "worker.yml")
	require.NoError(t, os.WriteFile(path, []byte("commandbus:\n  domainz: {}\n"), 0o600))

	cfg, err := config.Load(path)
	require.Nil(t, cfg)
	require.ErrorIs(t, err, commandbus.ErrInvalidConfig)
	require.ErrorContains(t, err, path)
	require.ErrorContains(t, err, `line 2: unknown key "domainz"`)
	var invalid *commandbus.ConfigError
	require.True(t, errors.As(err, &invalid), "the commandbus.ConfigError is reachable through the path")
}

func TestConfigProfiles(t *testing.T) {
	t.Parallel()

	commandSteps := map[string]*commandbus.CommandStepConfig{
		"bookFx":   {Domain: "fx", CommandType: "BookFx", Timeout: commandbus.Duration(2 * time.Minute)},
		"bookRisk": {Domain: "risk", CommandType: "BookRisk", Timeout: commandbus.Duration(2 * time.Minute)},
	}
	tests := []struct {
		file              string
		features          commandbus.Features
		domains           map[string]*commandbus.DomainConfig
		commandSteps      map[string]*commandbus.CommandStepConfig
		kubernetesEnviron []string // the reference Kubernetes variables for the profile, when there are any
	}{
		{
			file: "ratelimited-worker.yml",
			features: commandbus.Features{
				CommandHandlers:  boolPtr(true),
				ProcessExecution: boolPtr(false),
				ReplyProcessing:  boolPtr(false),
			},
			domains: map[string]*commandbus.DomainConfig{
				"fx":       {Enabled: boolPtr(true), ConcurrentMessages: 2},
				"risk":     {Enabled: boolPtr(true), ConcurrentMessages: 2},
				"payments": {Enabled: boolPtr(false)},
			},
			kubernetesEnviron: []string{
				"COMMANDBUS_FEATURES_COMMAND_HANDLERS=true",
				"COMMANDBUS_FEATURES_PROCESS_EXECUTION=false",
				"COMMANDBUS_FEATURES_REPLY_PROCESSING=false",
				"COMMANDBUS_DOMAINS_FX_ENABLED=true",
				"COMMANDBUS_DOMAINS_FX_CONCURRENT_MESSAGES=2",
				"COMMANDBUS_DOMAINS_RISK_ENABLED=true",
				"COMMANDBUS_DOMAINS_RISK_CONCURRENT_MESSAGES=2",
				"COMMANDBUS_DOMAINS_PAYMENTS_ENABLED=false",
			},
		},
		{
			file: "payments-worker.yml",
			features: commandbus.Features{
				CommandHandlers:  boolPtr(true),
				ProcessExecution: boolPtr(true),
				ReplyProcessing:  boolPtr(true),
			},
			domains: map[string]*commandbus.DomainConfig{
				"fx":       {Enabled: boolPtr(false)},
				"risk":     {Enabled: boolPtr(false)},
				"payments": {Enabled: boolPtr(true), ConcurrentMessages: 10},
			},
			commandSteps: commandSteps,
			kubernetesEnviron: []string{
				"COMMANDBUS_FEATURES_COMMAND_HANDLERS=true",
				"COMMANDBUS_FEATURES_PROCESS_EXECUTION=true",
				"COMMANDBUS_FEATURES_REPLY_PROCESSING=true",
				"COMMANDBUS_DOMAINS_FX_ENABLED=false",
				"COMMANDBUS_DOMAINS_RISK_ENABLED=false",
				"COMMANDBUS_DOMAINS_PAYMENTS_ENABLED=true",
				"COMMANDBUS_DOMAINS_PAYMENTS_CONCURRENT_MESSAGES=10",
				// The Kubernetes example leaves the command steps to the profile file.
				"COMMANDBUS_COMMAND_STEPS_BOOKFX_DOMAIN=fx",
				"COMMANDBUS_COMMAND_STEPS_BOOKFX_COMMAND_TYPE=BookFx",
				"COMMANDBUS_COMMAND_STEPS_BOOKFX_TIMEOUT=2m",
				"COMMANDBUS_COMMAND_STEPS_BOOKRISK_DOMAIN=risk",
				"COMMANDBUS_COMMAND_STEPS_BOOKRISK_COMMAND_TYPE=BookRisk",
				"COMMANDBUS_COMMAND_STEPS_BOOKRISK_TIMEOUT=2m",
			},
		},
		{
			file: "multipurpose-worker.yml",
			features: commandbus.Features{
				CommandHandlers:  boolPtr(true),
				ProcessExecution: boolPtr(true),
				ReplyProcessing:  boolPtr(true),
			},
			domains: map[string]*commandbus.DomainConfig{
				"fx":       {Enabled: boolPtr(true), ConcurrentMessages: 2},
				"risk":     {Enabled: boolPtr(true), ConcurrentMessages: 3},
				"payments": {Enabled: boolPtr(true), ConcurrentMessages: 10},
			},
			commandSteps: commandSteps,
		},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			t.Parallel()

			data, err := os.ReadFile(filepath.Join("..", "examples", "profiles", tt.file))
			require.NoError(t, err)
			cfg, err := config.Parse(data, nil)
			require.NoError(t, err)

			require.Equal(t, tt.features, cfg.Features)
			require.Equal(t, tt.domains, cfg.Domains)
			require.Equal(t, tt.commandSteps, cfg.CommandSteps)

			loaded, err := config.Load(filepath.Join("..", "examples", "profiles", tt.file))
			require.NoError(t, err)
			require.Equal(t, tt.features, loaded.Features)

			if tt.kubernetesEnviron != nil {
				fromEnviron := mustParseConfig(t, "", tt.kubernetesEnviron...)
				require.Equal(t, cfg.Features, fromEnviron.Features, "the Kubernetes variables give the profile")
				require.Equal(t, cfg.Domains, fromEnviron.Domains)
				for name, step := range cfg.CommandSteps {
					require.Equal(t, step, fromEnviron.CommandSteps[strings.ToLower(name)])
				}
			}
		})
	}
}

func TestConfigProfileEnvOverride(t *testing.T) {
	t.Parallel()

	// A deployment turns one knob of a profile without a file of its own.
	data, err := os.ReadFile(filepath.Join("..", "examples", "profiles", "payments-worker.yml"))
	require.NoError(t, err)
	cfg, err := config.Parse(data, []string{
		"COMMANDBUS_COMMAND_STEPS_BOOKFX_TIMEOUT=45s",
		"COMMANDBUS_DOMAINS_PAYMENTS_CONCURRENT_MESSAGES=20",
	})
	require.NoError(t, err)

	require.Equal(t, commandbus.Duration(45*time.Second), cfg.CommandSteps["bookFx"].Timeout)
	require.Equal(t, commandbus.Duration(2*time.Minute), cfg.CommandSteps["bookRisk"].Timeout)
	require.Equal(t, 20, cfg.Domains["payments"].ConcurrentMessages)
}

// A configuration written in the older style: process types directly under process, the
// simulator's poll interval in milliseconds.
func TestParseConfigProcessTypesUnderProcessAndSimulator(t *testing.T) {
	t.Parallel()
	cfg := mustParseConfig(t, `
commandbus:
  process:
    # Polling intervals
    pending-poll-interval: 1000      # ms - poll for PENDING processes
    retry-poll-interval: 5000        # ms - poll for retry-due processes
    timeout-check-interval: 60000    # ms - check wait timeouts
    deadline-check-interval: 60000   # ms - check process deadlines

    # Global defaults
    default-wait-timeout: PT1H       # ISO-8601 duration (1 hour)

    # Per-process-type overrides (by process type name)
    payment:
      default-wait-timeout: PT24H    # 24 hours for payments
      deadline-action: COMPENSATE    # COMPENSATE, TSQ, FAIL

  simulator:
    poll-interval: 1000              # ms - network simulator poll interval
`)
	require.Equal(t, &commandbus.ProcessTypeConfig{DefaultWaitTimeout: commandbus.Duration(24 * time.Hour), DeadlineAction: "COMPENSATE"}, cfg.Process.Types["payment"])
	require.Equal(t, commandbus.Duration(time.Hour), cfg.Process.DefaultWaitTimeout)
	require.Equal(t, commandbus.Duration(time.Second), cfg.Process.PendingPollInterval)
	require.Equal(t, commandbus.Duration(time.Second), cfg.Simulator.PollInterval)
	require.Same(t, cfg.Process.Types["payment"], cfg.ProcessType("payment"))

	// The environment reaches a type written either way, and creates one directly under process.
	cfg = mustParseConfig(t, "process:\n  payment:\n    deadline-action: TSQ\n",
		"COMMANDBUS_PROCESS_PAYMENT_DEADLINE_ACTION=FAIL", "COMMANDBUS_PROCESS_PAYMENTSTEP_DEFAULT_WAIT_TIMEOUT=PT24H")
	require.Equal(t, "FAIL", cfg.Process.Types["payment"].DeadlineAction)
	require.Equal(t, commandbus.Duration(24*time.Hour), cfg.ProcessType("PaymentStep").DefaultWaitTimeout,
		"an entry created from the environment is lower-cased and still found by the type's name")
	_, err := config.Parse(nil, []string{"COMMANDBUS_PROCESS_PAYMENT_DEADLINE_ACTON=FAIL"})
	require.ErrorContains(t, err, "COMMANDBUS_PROCESS_PAYMENT_DEADLINE_ACTON")
}

// Entries created from environment variables are named in lower case; the lookups by step and
// process type name find them, so COMMANDBUS_COMMAND_STEPS_BOOKFX_TIMEOUT reaches bookFx.
func TestCommandStepLookupFindsEnvironmentEntries(t *testing.T) {
	t.Parallel()
	cfg := mustParseConfig(t, "", "COMMANDBUS_COMMAND_STEPS_BOOKFX_TIMEOUT=45s", "COMMANDBUS_COMMAND_STEPS_STEP_BOOK_FX_DOMAIN=fx2")
	require.Contains(t, cfg.CommandSteps, "bookfx")
	require.Equal(t, commandbus.Duration(45*time.Second), cfg.CommandStep("bookFx").Timeout)
	require.Equal(t, "fx2", cfg.CommandStep("STEP_BOOK_FX").Domain)
	require.Nil(t, cfg.CommandStep("bookRisk"))

	full := cfg.WithDefaults()
	got := full.CommandStepOr("bookFx", "fx", "BookFx")
	require.Equal(t, commandbus.CommandStepConfig{Domain: "fx", CommandType: "BookFx", Timeout: commandbus.Duration(45 * time.Second)}, got)
	got = full.CommandStepOr("STEP_BOOK_FX", "fx", "BookFxContract")
	require.Equal(t, "fx2", got.Domain)
	require.Equal(t, "BookFxContract", got.CommandType)
	require.Equal(t, commandbus.Duration(commandbus.DefaultCommandStepTimeout), got.Timeout)
}

// A file's command step without a timeout waits as long as its domain's redelivery window (see
// commandbus.DomainConfig.RedeliveryWindow), longer for a domain with a longer lease; an explicit
// timeout is kept.
func TestDefaultStepTimeoutOutlastsRedelivery(t *testing.T) {
	t.Parallel()
	// A domain with a longer lease gets a longer default wait, in code and in a file's entry.
	cfg := mustParseConfig(t, "domains:\n  fx:\n    visibility-timeout: 60s\ncommand-steps:\n  bookFx:\n    domain: fx\n").WithDefaults()
	window := cfg.Domain("fx").RedeliveryWindow()
	require.Equal(t, 183600*time.Millisecond, window)
	require.Equal(t, commandbus.Duration(window), cfg.CommandStepOr("other", "fx", "X").Timeout)
	require.Equal(t, commandbus.Duration(window), cfg.CommandSteps["bookFx"].Timeout)
	// An explicit timeout is the operator's choice and is kept.
	cfg = mustParseConfig(t, "command-steps:\n  bookFx:\n    timeout: 30s\n").WithDefaults()
	require.Equal(t, commandbus.Duration(30*time.Second), cfg.CommandStepOr("bookFx", "fx", "BookFx").Timeout)
}

func TestParseConfigPaymentsMaxAmounts(t *testing.T) {
	t.Parallel()
	cfg := mustParseConfig(t, "payments:\n  max-amounts:\n    USD: \"10000000.00\"\n    JPY: 1500000000\n",
		"COMMANDBUS_PAYMENTS_MAX_AMOUNTS_EUR=250000.50")
	require.Equal(t, map[string]string{"USD": "10000000.00", "JPY": "1500000000", "eur": "250000.50"}, cfg.Payments.MaxAmounts)
	_, err := config.Parse([]byte("payments:\n  max-amounts:\n    usd: \"1\"\n    USD: \"2\"\n"), nil)
	require.ErrorContains(t, err, "payments.max-amounts: USD is written more than once")
}

func boolPtr(b bool) *bool { return &b }

// The deployment keys have defaults of their own, applied beside the library's.
func TestFileWithDefaults(t *testing.T) {
	t.Parallel()
	file := mustParseConfig(t, "domains:\n  fx: {}\n")
	full := file.WithDefaults()
	require.Equal(t, config.DefaultDatabaseSchema, full.Database.Schema)
	require.Equal(t, config.DefaultServerAddr, full.Server.Addr)
	require.Equal(t, commandbus.DefaultConcurrentMessages, full.Domains["fx"].ConcurrentMessages, "the library's defaults too")
	require.Empty(t, file.Database.Schema, "WithDefaults leaves the parsed file alone")
	require.Zero(t, file.Domains["fx"].ConcurrentMessages)

	kept := mustParseConfig(t, "database:\n  schema: bus\nserver:\n  addr: 0.0.0.0:9000\n").WithDefaults()
	require.Equal(t, "bus", kept.Database.Schema)
	require.Equal(t, "0.0.0.0:9000", kept.Server.Addr)
}

// Each token of server.tokens is checked, and its problem names the token by its place.
func TestParseConfigServerTokenProblems(t *testing.T) {
	t.Parallel()
	invalid := parseConfigError(t, `
server:
  tokens:
    - subject: alice
      token: 0123456789abcdef
      role: operator
    - token: short
      role: admin
`)
	require.Len(t, invalid.Problems, 3, invalid.Error())
	require.ErrorContains(t, invalid.Problems[0], "server.tokens[1].subject: required")
	require.ErrorContains(t, invalid.Problems[1], "server.tokens[1].token: must be at least 16 characters (or give token-file or token-sha256)")
	require.ErrorContains(t, invalid.Problems[2], `server.tokens[1].role: must be viewer or operator, got "admin"`)
}

// The library's keys and the deployment's sit side by side at the top level, in the file and in
// the environment, and the library's part is what a client is given.
func TestParseConfigLibraryAndDeploymentKeysSideBySide(t *testing.T) {
	t.Parallel()
	file := mustParseConfig(t, "outbox:\n  batch-size: 50\ndatabase:\n  url: postgres://file/db\n",
		"COMMANDBUS_WATCHDOG_INTERVAL=9s", "COMMANDBUS_SIMULATOR_ENABLED=true")
	require.Equal(t, 50, file.Outbox.BatchSize)
	require.Equal(t, commandbus.Duration(9*time.Second), file.Config.WatchdogInterval)
	require.Equal(t, "postgres://file/db", file.Database.URL)
	require.True(t, file.Simulator.Enabled)
	require.NoError(t, file.Config.WithDefaults().Validate())
}

// The HTTP timeouts: from the file or the environment; negative ones, and a read-header timeout
// past the read timeout, are refused naming the key.
func TestParseConfigServerTimeouts(t *testing.T) {
	t.Parallel()
	cfg := mustParseConfig(t, "server:\n  write-timeout: 5m\n", "COMMANDBUS_SERVER_IDLE_TIMEOUT=30s")
	require.Equal(t, commandbus.Duration(5*time.Minute), cfg.Server.WriteTimeout)
	require.Equal(t, commandbus.Duration(30*time.Second), cfg.Server.IdleTimeout)
	require.Zero(t, cfg.Server.ReadTimeout, "unset: the server's default applies")

	err := parseConfigError(t, "server:\n  read-timeout: 5s\n  read-header-timeout: 10s\n  idle-timeout: -1s\n")
	require.ErrorContains(t, err, `server.idle-timeout: duration "-1s" must not be negative`)
	require.ErrorContains(t, err, "server.read-header-timeout (10s) must not exceed server.read-timeout (5s)")
}

// outbox.max-lag paces the runtime by the relay: from the file or the environment; a negative
// one is refused naming the key.
func TestParseConfigOutboxMaxLag(t *testing.T) {
	t.Parallel()
	file := mustParseConfig(t, "outbox:\n  max-lag: 20ms\n")
	require.Equal(t, commandbus.Duration(20*time.Millisecond), file.Outbox.MaxLag)
	file = mustParseConfig(t, "", "COMMANDBUS_OUTBOX_MAX_LAG=50ms")
	require.Equal(t, commandbus.Duration(50*time.Millisecond), file.Outbox.MaxLag)
	require.NoError(t, file.Config.WithDefaults().Validate())
	require.Zero(t, mustParseConfig(t, "").Config.WithDefaults().Outbox.MaxLag, "off unless set")

	_, err := config.Parse([]byte("outbox:\n  max-lag: -1s\n"), nil)
	require.ErrorContains(t, err, `outbox.max-lag: duration "-1s" must not be negative`)
	lib := (&commandbus.Config{Outbox: commandbus.OutboxConfig{MaxLag: commandbus.Duration(-time.Second)}}).WithDefaults()
	require.ErrorContains(t, lib.Validate(), "outbox.max-lag: must not be negative, got -1s")
}

// outbox.handoff hands the runtime's outbox messages to the instance's relay: on unless turned
// off, from the file or the environment.
func TestParseConfigOutboxHandoff(t *testing.T) {
	t.Parallel()
	require.True(t, *mustParseConfig(t, "").Config.WithDefaults().Outbox.Handoff, "on unless turned off")
	require.False(t, *mustParseConfig(t, "outbox:\n  handoff: false\n").Config.WithDefaults().Outbox.Handoff)
	require.False(t, *mustParseConfig(t, "", "COMMANDBUS_OUTBOX_HANDOFF=false").Config.WithDefaults().Outbox.Handoff)
	_, err := config.Parse([]byte("outbox:\n  handoff: sometimes\n"), nil)
	require.Error(t, err)
}
