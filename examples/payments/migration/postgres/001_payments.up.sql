-- The payments platform's bounded contexts: accounts, limits, risk, fx, payments, network and
-- batches. IF NOT EXISTS adopts the tables that platforms before this migration created at start.

CREATE TABLE IF NOT EXISTS {t}account (
	id              TEXT PRIMARY KEY,
	name            TEXT NOT NULL,
	kind            TEXT NOT NULL,
	currency        TEXT NOT NULL,
	opening_balance TEXT NOT NULL,
	balance         TEXT NOT NULL,
	held            TEXT NOT NULL,
	daily_limit     TEXT NOT NULL,
	created_at      BIGINT NOT NULL
);

CREATE TABLE IF NOT EXISTS {t}hold (
	id              TEXT PRIMARY KEY,
	idempotency_key TEXT NOT NULL UNIQUE,
	payment_id      TEXT NOT NULL,
	account_id      TEXT NOT NULL,
	amount          TEXT NOT NULL,
	currency        TEXT NOT NULL,
	status          TEXT NOT NULL,
	created_at      BIGINT NOT NULL,
	updated_at      BIGINT NOT NULL
);

CREATE INDEX IF NOT EXISTS pay_hold_payment_idx ON {t}hold (payment_id);

CREATE TABLE IF NOT EXISTS {t}limit_usage (
	account_id TEXT NOT NULL,
	day        TEXT NOT NULL,
	used       TEXT NOT NULL,
	day_limit  TEXT NOT NULL,
	PRIMARY KEY (account_id, day)
);

CREATE TABLE IF NOT EXISTS {t}limit_reservation (
	id              TEXT PRIMARY KEY,
	idempotency_key TEXT NOT NULL UNIQUE,
	payment_id      TEXT NOT NULL,
	account_id      TEXT NOT NULL,
	day             TEXT NOT NULL,
	amount          TEXT NOT NULL,
	status          TEXT NOT NULL,
	created_at      BIGINT NOT NULL,
	updated_at      BIGINT NOT NULL
);

CREATE TABLE IF NOT EXISTS {t}risk_booking (
	reference         TEXT PRIMARY KEY,
	idempotency_key   TEXT NOT NULL UNIQUE,
	payment_id        TEXT NOT NULL,
	amount            TEXT NOT NULL,
	currency          TEXT NOT NULL,
	usd_equivalent    TEXT NOT NULL,
	requires_approval INTEGER NOT NULL,
	status            TEXT NOT NULL,
	created_at        BIGINT NOT NULL,
	updated_at        BIGINT NOT NULL
);

CREATE TABLE IF NOT EXISTS {t}approval (
	id             TEXT PRIMARY KEY,
	payment_id     TEXT NOT NULL UNIQUE,
	execution_id   TEXT NOT NULL,
	risk_reference TEXT NOT NULL,
	amount         TEXT NOT NULL,
	currency       TEXT NOT NULL,
	status         TEXT NOT NULL,
	actor          TEXT,
	reason         TEXT,
	requested_at   BIGINT NOT NULL,
	decided_at     BIGINT
);

CREATE INDEX IF NOT EXISTS pay_approval_status_idx ON {t}approval (status, requested_at);

CREATE TABLE IF NOT EXISTS {t}fx_contract (
	id              TEXT PRIMARY KEY,
	idempotency_key TEXT NOT NULL UNIQUE,
	payment_id      TEXT NOT NULL,
	sell_currency   TEXT NOT NULL,
	buy_currency    TEXT NOT NULL,
	sell_amount     TEXT NOT NULL,
	buy_amount      TEXT NOT NULL,
	rate            TEXT NOT NULL,
	status          TEXT NOT NULL,
	created_at      BIGINT NOT NULL,
	updated_at      BIGINT NOT NULL
);

CREATE INDEX IF NOT EXISTS pay_fx_contract_payment_idx ON {t}fx_contract (payment_id);

CREATE TABLE IF NOT EXISTS {t}payment (
	id              TEXT PRIMARY KEY,
	idempotency_key TEXT NOT NULL UNIQUE,
	process_type    TEXT,
	execution_id    TEXT,
	started         INTEGER NOT NULL,
	batch_id        TEXT,
	debit_account   TEXT NOT NULL,
	credit_account  TEXT NOT NULL,
	amount          TEXT NOT NULL,
	currency        TEXT NOT NULL,
	credit_currency TEXT NOT NULL,
	value_date      TEXT NOT NULL,
	cutoff          BIGINT NOT NULL,
	status          TEXT NOT NULL,
	behavior        TEXT,
	created_at      BIGINT NOT NULL,
	updated_at      BIGINT NOT NULL
);

CREATE INDEX IF NOT EXISTS pay_payment_batch_idx ON {t}payment (batch_id);

CREATE INDEX IF NOT EXISTS pay_payment_scheduled_idx ON {t}payment (value_date, status);

CREATE INDEX IF NOT EXISTS pay_payment_created_idx ON {t}payment (created_at);

CREATE TABLE IF NOT EXISTS {t}payment_submission (
	id              TEXT PRIMARY KEY,
	payment_id      TEXT NOT NULL,
	idempotency_key TEXT NOT NULL UNIQUE,
	reference       TEXT NOT NULL,
	debit_account   TEXT NOT NULL,
	credit_account  TEXT NOT NULL,
	debit_amount    TEXT NOT NULL,
	debit_currency  TEXT NOT NULL,
	credit_amount   TEXT NOT NULL,
	credit_currency TEXT NOT NULL,
	fx_contract_id  TEXT,
	status          TEXT NOT NULL,
	submitted_at    BIGINT NOT NULL,
	recalled_at     BIGINT
);

CREATE UNIQUE INDEX IF NOT EXISTS pay_payment_submission_live_idx ON {t}payment_submission (payment_id) WHERE status = 'SUBMITTED';

CREATE INDEX IF NOT EXISTS pay_payment_submission_payment_idx ON {t}payment_submission (payment_id);

CREATE TABLE IF NOT EXISTS {t}ledger_entry (
	id            TEXT PRIMARY KEY,
	submission_id TEXT NOT NULL,
	payment_id    TEXT NOT NULL,
	account_id    TEXT NOT NULL,
	currency      TEXT NOT NULL,
	amount        TEXT NOT NULL,
	kind          TEXT NOT NULL,
	created_at    BIGINT NOT NULL
);

CREATE INDEX IF NOT EXISTS pay_ledger_entry_account_idx ON {t}ledger_entry (account_id);

CREATE TABLE IF NOT EXISTS {t}network_pending (
	id           TEXT PRIMARY KEY,
	payment_id   TEXT NOT NULL,
	execution_id TEXT NOT NULL,
	level        INTEGER NOT NULL,
	status       TEXT NOT NULL,
	answer       TEXT,
	actor        TEXT,
	reason       TEXT,
	created_at   BIGINT NOT NULL,
	answered_at  BIGINT,
	UNIQUE (payment_id, level)
);

CREATE INDEX IF NOT EXISTS pay_network_pending_status_idx ON {t}network_pending (status, created_at);

CREATE TABLE IF NOT EXISTS {t}batch_run (
	id            TEXT PRIMARY KEY,
	scheduled_for TEXT NOT NULL,
	process_type  TEXT NOT NULL,
	behavior      TEXT,
	total         INTEGER NOT NULL,
	created_at    BIGINT NOT NULL
);

CREATE TABLE IF NOT EXISTS {t}batch_item (
	batch_id     TEXT NOT NULL,
	payment_id   TEXT NOT NULL,
	execution_id TEXT NOT NULL,
	PRIMARY KEY (batch_id, payment_id)
);
