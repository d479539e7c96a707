-- The execution core: one row per process, saga, TCC transaction or workflow run, with its
-- user state, timers, lease and fence; an append-only log; and the async responses waiting to be
-- applied. Same columns, checks and indexes as the PostgreSQL migration of the same number, in
-- SQLite types (see 001): timestamps are INTEGER unix microseconds, UUIDs and JSON are TEXT, and
-- the BINARY collation orders like PostgreSQL's "C". PostgreSQL's BRIN index on created_at is a
-- plain index here.
CREATE TABLE {schema}.execution (
    id                   TEXT PRIMARY KEY NOT NULL,
    model                TEXT NOT NULL,
    type                 TEXT NOT NULL,
    domain               TEXT NOT NULL,
    tenant_id            TEXT,
    business_key         TEXT,
    batch_id             TEXT,
    status               TEXT NOT NULL CHECK (status IN ('PENDING', 'EXECUTING', 'WAITING_FOR_ASYNC',
                             'WAITING_FOR_RETRY', 'WAITING_FOR_TSQ', 'COMPENSATING', 'COMPENSATED',
                             'COMPLETED', 'CANCELLED', 'FAILED')),
    state                TEXT NOT NULL DEFAULT '{}',
    step                 TEXT,
    current_wait         TEXT,
    next_retry_at        INTEGER,
    next_wait_timeout_at INTEGER,
    deadline_at          INTEGER,
    retries              INTEGER NOT NULL DEFAULT 0,
    lease_until          INTEGER,
    fence                INTEGER NOT NULL DEFAULT 0,
    worker_id            TEXT,
    -- When a runner should take the execution up: set for new executions, when a response
    -- arrives, and to the lease's end while a runner holds it (so a dead runner's work is resumed).
    wake_at              INTEGER,
    responses_received   INTEGER NOT NULL DEFAULT 0,
    responses_applied    INTEGER NOT NULL DEFAULT 0,
    error_code           TEXT,
    error_message        TEXT,
    created_at           INTEGER NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000000 AS INTEGER)),
    updated_at           INTEGER NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000000 AS INTEGER)),
    completed_at         INTEGER
) STRICT;

-- The pending poller: new executions, arrived responses, expired runner leases.
CREATE INDEX {schema}.execution_wake_idx ON {schema}.execution (wake_at) WHERE wake_at IS NOT NULL;
-- The retry poller.
CREATE INDEX {schema}.execution_retry_idx ON {schema}.execution (next_retry_at)
    WHERE status = 'WAITING_FOR_RETRY';
-- The wait-timeout checker.
CREATE INDEX {schema}.execution_wait_timeout_idx ON {schema}.execution (next_wait_timeout_at)
    WHERE status = 'WAITING_FOR_ASYNC';
-- The deadline checker.
CREATE INDEX {schema}.execution_deadline_idx ON {schema}.execution (deadline_at)
    WHERE deadline_at IS NOT NULL AND completed_at IS NULL;
-- The process troubleshooting queue.
CREATE INDEX {schema}.execution_tsq_idx ON {schema}.execution (domain) WHERE status = 'WAITING_FOR_TSQ';
CREATE INDEX {schema}.execution_business_key_idx ON {schema}.execution (type, business_key)
    WHERE business_key IS NOT NULL;
CREATE INDEX {schema}.execution_batch_idx ON {schema}.execution (batch_id) WHERE batch_id IS NOT NULL;
CREATE INDEX {schema}.execution_created_idx ON {schema}.execution (created_at);

-- Append-only: STEP, WAIT, SIDE_EFFECT, COMMAND, ASYNC_RESPONSE, COMPENSATION, LIFECYCLE, TSQ_*.
-- Replay rebuilds completed steps, satisfied waits and side effects from it, in order.
CREATE TABLE {schema}.execution_log (
    execution_id  TEXT NOT NULL,
    seq           INTEGER NOT NULL,
    at            INTEGER NOT NULL,
    entry_type    TEXT NOT NULL,
    name          TEXT,
    step_status   TEXT,
    attempt       INTEGER,
    max_attempts  INTEGER,
    request       TEXT,
    response      TEXT,
    error_code    TEXT,
    error_message TEXT,
    actor         TEXT,
    reason        TEXT,
    PRIMARY KEY (execution_id, seq)
) STRICT;

-- Async responses, durable the moment they arrive; the runner applies them in order.
CREATE TABLE {schema}.execution_response (
    execution_id TEXT NOT NULL,
    seq          INTEGER NOT NULL,
    name         TEXT NOT NULL,
    payload      TEXT NOT NULL,
    received_at  INTEGER NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000000 AS INTEGER)),
    PRIMARY KEY (execution_id, seq)
) STRICT;
