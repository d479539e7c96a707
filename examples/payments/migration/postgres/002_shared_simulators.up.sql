-- The simulated FX provider's contracts: every replica's endpoint (or `commandbus simulate fx`)
-- serves the same ones, as a real provider is one external service.
CREATE TABLE {t}fxsim_contract (
	id              TEXT PRIMARY KEY,
	idempotency_key TEXT NOT NULL UNIQUE,
	sell_currency   TEXT NOT NULL,
	buy_currency    TEXT NOT NULL,
	sell_amount     TEXT NOT NULL,
	buy_amount      TEXT NOT NULL,
	rate            TEXT NOT NULL,
	value_date      TEXT NOT NULL,
	reference       TEXT NOT NULL,
	status          TEXT NOT NULL
);

-- Roles one instance plays at a time (the network simulator), held by a lease its holder renews
-- and another instance takes over once it expired.
CREATE TABLE {t}role_lease (
	role       TEXT PRIMARY KEY,
	holder     TEXT NOT NULL,
	expires_at BIGINT NOT NULL
);

INSERT INTO {t}role_lease (role, holder, expires_at) VALUES ('network-simulator', '', 0);
