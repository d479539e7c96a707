-- Operator suspension: the SUSPENDED status, the status a suspended execution had (restored by
-- the resume), and a pending request to suspend an execution a runner holds (its release stores
-- SUSPENDED), with who asked and why. SQLite cannot change a CHECK constraint in place, so the
-- table is rebuilt with the same columns, checks and indexes as before plus the new ones.
CREATE TABLE {schema}.execution_next (
    id                   TEXT PRIMARY KEY NOT NULL,
    model                TEXT NOT NULL,
    type                 TEXT NOT NULL,
    domain               TEXT NOT NULL,
    tenant_id            TEXT,
    business_key         TEXT,
    batch_id             TEXT,
    status               TEXT NOT NULL CHECK (status IN ('PENDING', 'EXECUTING', 'WAITING_FOR_ASYNC',
                             'WAITING_FOR_RETRY', 'WAITING_FOR_TSQ', 'COMPENSATING', 'COMPENSATED',
                             'COMPLETED', 'CANCELLED', 'FAILED', 'SUSPENDED')),
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
    completed_at         INTEGER,
    suspended_from       TEXT,
    suspend_requested    INTEGER NOT NULL DEFAULT 0,
    suspend_actor        TEXT,
    suspend_reason       TEXT
) STRICT;

INSERT INTO {schema}.execution_next (id, model, type, domain, tenant_id, business_key, batch_id, status, state, step, current_wait, next_retry_at, next_wait_timeout_at, deadline_at, retries, lease_until, fence, worker_id, wake_at, responses_received, responses_applied, error_code, error_message, created_at, updated_at, completed_at)
    SELECT id, model, type, domain, tenant_id, business_key, batch_id, status, state, step, current_wait, next_retry_at, next_wait_timeout_at, deadline_at, retries, lease_until, fence, worker_id, wake_at, responses_received, responses_applied, error_code, error_message, created_at, updated_at, completed_at FROM {schema}.execution;
DROP TABLE {schema}.execution;
ALTER TABLE {schema}.execution_next RENAME TO {schema}.execution;

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
