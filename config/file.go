// Package config reads a commandbus deployment's configuration: one YAML file shaped as a
// Spring-style application.yml, every key overridable from the environment
// (COMMANDBUS_DOMAINS_FX_CONCURRENT_MESSAGES=2).
//
// A File holds the library's commandbus.Config (features, domains, command-steps, process,
// brokers, outbox and the pollers' intervals) and the keys only a deployment has: where the
// database is, what the server listens on and which tokens it accepts, and the reference payments
// platform's simulator, limits and FX provider. The library itself reads no file and no
// environment; a binary calls Load and hands File.Config to commandbus.NewClient.
//
//	file, err := config.Load("worker.yml")
//	if err != nil {
//		return err // every problem at once, with its line or variable
//	}
//	client, err := commandbus.NewClient(drv, &file.Config)
package config

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"strings"
	"time"

	"github.com/commandbus/commandbus"
)

// File is a deployment's configuration: the library's Config, written at the top level of the
// document beside the deployment keys, and those keys. Its zero value is an empty configuration;
// every field has a documented default applied by WithDefaults.
type File struct {
	// Config is what the library reads: features, domains, command-steps, process, amqp,
	// amqp10, kafka, events, outbox and the intervals. Its keys sit at the top level of the file.
	commandbus.Config `yaml:",inline"`
	// Database says where commandbus stores its state.
	Database DatabaseConfig `yaml:"database"`
	// Server configures the REST API and console (the serve command of package cli).
	Server ServerConfig `yaml:"server"`
	// Simulator configures the reference platform's network simulator.
	Simulator SimulatorConfig `yaml:"simulator"`
	// Payments configures the reference payments platform (examples/payments).
	Payments PaymentsConfig `yaml:"payments"`
	// FX says where the reference platform's FX provider is.
	FX FXConfig `yaml:"fx"`
	// Tracing exports OpenTelemetry traces over OTLP (off by default).
	Tracing TracingConfig `yaml:"tracing"`
	// Tenants configures capacity-limited admission: the capacity-limited types, the tiers'
	// limits and the admission dispatcher.
	Tenants TenantsConfig `yaml:"tenants"`
}

// DatabaseConfig says where state lives.
type DatabaseConfig struct {
	// URL is a postgres:// URL or a libpq key/value DSN (empty: the PG* environment variables), or
	// sqlite://PATH (or a bare path ending .db) for the embedded store.
	URL string `yaml:"url"`
	// Schema holds commandbus objects on PostgreSQL. Default: commandbus.
	Schema string `yaml:"schema"`
}

// ServerConfig configures the REST API and console (the serve command of package cli).
type ServerConfig struct {
	// Addr is the listen address. Default: 127.0.0.1:8080.
	Addr string `yaml:"addr"`
	// Tokens are the bearer tokens accepted by the API and console. From the environment, the
	// whole list is one YAML flow sequence in COMMANDBUS_SERVER_TOKENS, or a YAML file named by
	// COMMANDBUS_SERVER_TOKENS_FILE (a mounted secret).
	Tokens []TokenConfig `yaml:"tokens"`
	// TrustedProxies are the addresses (CIDR prefixes or single IPs) of the TLS-terminating
	// proxies in front of the server: only a request from one of them may say through
	// X-Forwarded-Proto that the client used HTTPS, which makes the console's cookies Secure.
	// Default: none, and only a TLS connection to the server itself counts.
	TrustedProxies []string `yaml:"trusted-proxies"`
	// SecureCookies marks the console's cookies Secure on every response, for a deployment that is
	// only ever reached over HTTPS. Default: false, and a cookie is Secure when the request came
	// over TLS, directly or through a trusted proxy.
	SecureCookies bool `yaml:"secure-cookies"`
	// ShutdownBudget bounds a graceful shutdown on SIGTERM or an interrupt, from the moment
	// /readyz starts failing to the exit: the drain delay, the HTTP server's shutdown and the
	// workers' (commandbus.Config's shutdown-timeout caps the latter within it). Keep it below the
	// orchestrator's grace period (Kubernetes: 30s). Default: 25s.
	ShutdownBudget commandbus.Duration `yaml:"shutdown-budget"`
	// DrainDelay is how long /readyz fails before the HTTP servers stop accepting, so the load
	// balancer takes the instance out first. It counts against ShutdownBudget. Default: 0 (none).
	DrainDelay commandbus.Duration `yaml:"drain-delay"`
	// ReadHeaderTimeout bounds reading a request's headers. Default (0): 10s.
	ReadHeaderTimeout commandbus.Duration `yaml:"read-header-timeout"`
	// ReadTimeout bounds reading a whole request, body included. Default (0): 30s.
	ReadTimeout commandbus.Duration `yaml:"read-timeout"`
	// WriteTimeout bounds handling a request and writing its answer (a payment submission runs
	// its process in the request). Default (0): 60s.
	WriteTimeout commandbus.Duration `yaml:"write-timeout"`
	// IdleTimeout bounds how long a keep-alive connection waits for its next request. Default
	// (0): 120s.
	IdleTimeout commandbus.Duration `yaml:"idle-timeout"`
}

// TokenConfig is one bearer token. Its secret is given in exactly one of three ways: Token (the
// secret itself), TokenFile (a file holding it) or TokenSHA256 (only its digest, so the
// configuration never holds the secret).
type TokenConfig struct {
	// Subject names who holds the token; it is recorded on every action taken with it.
	Subject string `yaml:"subject"`
	// Token is the secret: at least 16 characters.
	Token string `yaml:"token"`
	// TokenFile names a file holding the secret (a mounted Kubernetes or Docker secret); a
	// trailing newline is dropped. Parse reads it into Token.
	TokenFile string `yaml:"token-file"`
	// TokenSHA256 is the hex SHA-256 digest of the secret (printf %s "$TOKEN" | sha256sum). A
	// plain digest suffices because tokens are long random secrets, not passwords: a slow hash
	// would cost every request and protect nothing more.
	TokenSHA256 string `yaml:"token-sha256"`
	// Role is viewer or operator.
	Role string `yaml:"role"`
}

// SimulatorConfig configures the simulated payment network of the reference platform.
type SimulatorConfig struct {
	// Enabled runs the simulator in this instance (answers risk approvals and L1–L4). Default:
	// false; `commandbus demo` always runs it.
	Enabled bool `yaml:"enabled"`
	// PollInterval is how often it scans waiting payments. Default: 1s.
	PollInterval commandbus.Duration `yaml:"poll-interval"`
}

// PaymentsConfig configures the reference payments platform.
type PaymentsConfig struct {
	// MaxAmounts bounds the amount of one payment per debit currency, as plain decimals keyed by
	// ISO 4217 code: {USD: "10000000.00"}. A larger payment is refused. Currencies it leaves out
	// keep the platform's default bound (about ten million US dollars). Codes are read
	// case-insensitively (an environment variable's name is upper-cased).
	MaxAmounts map[string]string `yaml:"max-amounts"`
}

// FXConfig locates the reference platform's FX provider.
type FXConfig struct {
	// URL is the FX API's base URL, e.g. the one `commandbus simulate fx --addr` serves. Default:
	// each instance serves the simulated provider itself, its contracts in the database shared
	// by all of them.
	URL string `yaml:"url"`
}

// The defaults of the deployment keys, applied by WithDefaults.
const (
	DefaultDatabaseSchema = "commandbus"
	DefaultServerAddr     = "127.0.0.1:8080"
	// DefaultShutdownBudget keeps a graceful shutdown inside Kubernetes' default 30s grace period.
	DefaultShutdownBudget = commandbus.Duration(25 * time.Second)
)

// WithDefaults returns a copy of f with every unset field at its default: the library's (see
// commandbus.Config.WithDefaults) and the deployment keys'. The caller's File is not changed.
func (f *File) WithDefaults() *File {
	out := *f
	out.Config = *f.Config.WithDefaults()
	if out.Database.Schema == "" {
		out.Database.Schema = DefaultDatabaseSchema
	}
	if out.Server.Addr == "" {
		out.Server.Addr = DefaultServerAddr
	}
	if out.Server.ShutdownBudget == 0 {
		out.Server.ShutdownBudget = DefaultShutdownBudget
	}
	return &out
}

var (
	currencyRE     = regexp.MustCompile(`^[A-Za-z]{3}$`)
	plainDecimalRE = regexp.MustCompile(`^[0-9]{1,30}(\.[0-9]{1,18})?$`)
	sha256HexRE    = regexp.MustCompile(`^[0-9a-fA-F]{64}$`)
)

// Validate returns every problem in the configuration at once as a *commandbus.ConfigError
// (which matches commandbus.ErrInvalidConfig), or nil: the library's problems, then the
// deployment keys'. Call it on a File with defaults applied.
func (f *File) Validate() error {
	var errs []error
	if err := f.Config.Validate(); err != nil {
		var invalid *commandbus.ConfigError
		if errors.As(err, &invalid) {
			errs = append(errs, invalid.Problems...)
		} else {
			errs = append(errs, err)
		}
	}
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	for _, code := range sortedKeys(f.Payments.MaxAmounts) {
		amount := f.Payments.MaxAmounts[code]
		if !currencyRE.MatchString(code) {
			add("payments.max-amounts.%s: not a currency code (three letters, as USD)", code)
		}
		if !plainDecimalRE.MatchString(amount) {
			add("payments.max-amounts.%s: want a plain positive decimal such as 10000000.00, got %q", code, amount)
		} else if strings.Trim(amount, "0.") == "" {
			add("payments.max-amounts.%s: must be positive, got %q", code, amount)
		}
	}
	for _, code := range duplicateCurrencies(f.Payments.MaxAmounts) {
		add("payments.max-amounts: %s is written more than once (codes are case-insensitive)", code)
	}
	for _, timeout := range []struct {
		key string
		d   commandbus.Duration
	}{{"read-header-timeout", f.Server.ReadHeaderTimeout}, {"read-timeout", f.Server.ReadTimeout},
		{"write-timeout", f.Server.WriteTimeout}, {"idle-timeout", f.Server.IdleTimeout}} {
		if timeout.d < 0 {
			add("server.%s: must not be negative, got %s", timeout.key, time.Duration(timeout.d))
		}
	}
	if f.Server.ReadHeaderTimeout > 0 && f.Server.ReadTimeout > 0 && f.Server.ReadHeaderTimeout > f.Server.ReadTimeout {
		add("server.read-header-timeout (%s) must not exceed server.read-timeout (%s)", time.Duration(f.Server.ReadHeaderTimeout), time.Duration(f.Server.ReadTimeout))
	}
	for i, t := range f.Server.Tokens {
		if t.Subject == "" {
			add("server.tokens[%d].subject: required", i)
		}
		switch {
		case t.Token != "" && t.TokenSHA256 != "":
			add("server.tokens[%d]: give the secret as token, token-file or token-sha256, only one", i)
		case t.TokenSHA256 != "":
			if !sha256HexRE.MatchString(t.TokenSHA256) {
				add("server.tokens[%d].token-sha256: want 64 hex digits (printf %%s \"$TOKEN\" | sha256sum)", i)
			}
		case t.TokenFile != "":
			if len(t.Token) < 16 {
				add("server.tokens[%d].token-file: %s must hold at least 16 characters", i, t.TokenFile)
			}
		case len(t.Token) < 16:
			add("server.tokens[%d].token: must be at least 16 characters (or give token-file or token-sha256)", i)
		}
		if t.Role != "viewer" && t.Role != "operator" {
			add("server.tokens[%d].role: must be viewer or operator, got %q", i, t.Role)
		}
	}
	errs = append(errs, f.Tracing.validate()...)
	errs = append(errs, f.Tenants.validate()...)
	for i, p := range f.Server.TrustedProxies {
		if _, err := ParseTrustedProxy(p); err != nil {
			add("server.trusted-proxies[%d]: %v", i, err)
		}
	}
	for _, d := range []struct {
		key string
		d   commandbus.Duration
	}{{"shutdown-budget", f.Server.ShutdownBudget}, {"drain-delay", f.Server.DrainDelay}} {
		if d.d < 0 {
			add("server.%s: must not be negative, got %s", d.key, time.Duration(d.d))
		}
	}
	if f.Server.ShutdownBudget > 0 && f.Server.DrainDelay >= f.Server.ShutdownBudget {
		add("server.drain-delay (%s) must be shorter than server.shutdown-budget (%s)", time.Duration(f.Server.DrainDelay), time.Duration(f.Server.ShutdownBudget))
	}
	if len(errs) == 0 {
		return nil
	}
	return &commandbus.ConfigError{Problems: errs}
}

// duplicateCurrencies returns the currency codes written more than once ignoring case.
func duplicateCurrencies(m map[string]string) []string {
	seen := map[string]int{}
	var out []string
	for _, code := range sortedKeys(m) {
		up := strings.ToUpper(code)
		if seen[up]++; seen[up] == 2 {
			out = append(out, up)
		}
	}
	return out
}

// Load reads the YAML configuration file at path and overrides its keys from the process
// environment, as Parse describes. The File is returned without defaults; apply them with
// WithDefaults. A file that cannot be read gives an error naming path and matching
// fs.ErrNotExist when it is missing; an invalid file gives a *commandbus.ConfigError naming path.
func Load(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read configuration file: %w", err)
	}
	f, err := Parse(data, os.Environ())
	if err != nil {
		return nil, fmt.Errorf("configuration file %s: %w", path, err)
	}
	return f, nil
}

// Parse reads a YAML configuration and overrides its keys from environ, a list of KEY=VALUE
// entries such as os.Environ returns.
//
// The document holds the keys (features, domains, command-steps, process, database, server,
// fetch-cooldown, ...) either at the top level or under a single commandbus: key, as a
// Spring-style application.yml does. Decoding is strict: an unknown key, a key written twice or
// a value of the wrong type is a problem, reported with its line. YAML anchors, aliases and merge
// keys (<<) are allowed. A process type's overrides may be written directly under process
// (process.payment.deadline-action), or under process.types.
//
// Every key can be overridden by an environment variable named EnvPrefix followed by the key's
// path, with segments upper-cased and '-' turned into '_':
//
//	COMMANDBUS_FEATURES_PROCESS_EXECUTION=false
//	COMMANDBUS_DOMAINS_FX_CONCURRENT_MESSAGES=2
//	COMMANDBUS_COMMAND_STEPS_BOOKFX_TIMEOUT=45s
//	COMMANDBUS_PROCESS_DEFAULT_WAIT_TIMEOUT=PT2H
//
// A name segment of a map (a domain, command step or process type) is matched against the
// entries already in the file ignoring case and treating '-' and '_' alike, so BOOKFX sets
// bookFx; when no entry matches, a new entry is created whose name is the lower-cased segments
// joined by '_'; commandbus.Config.CommandStep and ProcessType find such an entry by the step's
// or type's name all the same (COMMANDBUS_COMMAND_STEPS_BOOKFX_TIMEOUT reaches bookFx). Names may
// span several segments: the name is chosen so that the rest of the variable names a key. A variable below a known
// section or key that names no key is a problem, so typos do not pass silently; other
// COMMANDBUS_ variables, such as COMMANDBUS_TEST_DATABASE_URL, are ignored.
//
// A list, such as server.tokens, is set whole by one variable holding a YAML sequence:
//
//	COMMANDBUS_SERVER_TOKENS='[{subject: ci, role: viewer, token-sha256: 9f86d0...}]'
//
// Any key can instead be read from a file, for secrets mounted as files: the variable's name ends
// in _FILE and its value is the file's path (COMMANDBUS_SERVER_TOKENS_FILE=/run/secrets/tokens.yml,
// COMMANDBUS_DATABASE_URL_FILE=/run/secrets/database-url); one trailing newline is dropped. Setting
// a key by both forms is a problem. A token's secret can also come from its own file
// (server.tokens[].token-file), which Parse reads.
//
// The result is validated with its defaults applied, but returned without them, so callers
// apply WithDefaults. Every problem of decoding, overriding and validation is returned at once as
// a *commandbus.ConfigError, which matches commandbus.ErrInvalidConfig.
func Parse(data []byte, environ []string) (*File, error) {
	f := &File{}
	d := &decoder{}
	d.decodeDocument(data, reflect.ValueOf(f).Elem())
	problems := d.problems
	problems = append(problems, applyEnvOverrides(f, environ)...)
	problems = append(problems, f.readTokenFiles()...)
	if err := f.WithDefaults().Validate(); err != nil {
		var invalid *commandbus.ConfigError
		if errors.As(err, &invalid) {
			problems = append(problems, invalid.Problems...)
		} else {
			problems = append(problems, err)
		}
	}
	if len(problems) > 0 {
		return nil, &commandbus.ConfigError{Problems: problems}
	}
	return f, nil
}
