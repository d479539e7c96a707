-- Tenants and capacity-limited admission (see the PostgreSQL migration for the model). SQLite
-- serialises writes, so an admission's count of held slots cannot race another admission. The
-- execution table is rebuilt to allow the QUEUED status (SQLite cannot change a CHECK in place).
CREATE TABLE {schema}.tenant_tier (
    tier       TEXT PRIMARY KEY NOT NULL,
    max_active INTEGER NOT NULL CHECK (max_active >= 0),
    updated_at INTEGER NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000000 AS INTEGER))
) STRICT;
INSERT INTO {schema}.tenant_tier (tier, max_active) VALUES ('FREE', 1), ('PRO', 5), ('ENTERPRISE', 20);

CREATE TABLE {schema}.tenant (
    id                  TEXT PRIMARY KEY NOT NULL,
    name                TEXT,
    tier                TEXT NOT NULL REFERENCES {schema}.tenant_tier (tier),
    status              TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'suspended', 'deleted')),
    max_active_override INTEGER CHECK (max_active_override >= 0),
    last_admitted_at    INTEGER,
    created_at          INTEGER NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000000 AS INTEGER)),
    updated_at          INTEGER NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000000 AS INTEGER))
) STRICT;

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
                             'COMPLETED', 'CANCELLED', 'FAILED', 'SUSPENDED', 'QUEUED')),
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
    suspend_reason       TEXT,
    signal_wake          INTEGER NOT NULL DEFAULT 0,
    parent_id            TEXT,
    root_id              TEXT,
    continued_from       TEXT,
    continued_as         TEXT,
    traceparent          TEXT,
    holds_slot           INTEGER NOT NULL DEFAULT 0,
    admitted_at          INTEGER
) STRICT;

INSERT INTO {schema}.execution_next (id, model, type, domain, tenant_id, business_key, batch_id, status, state, step, current_wait, next_retry_at, next_wait_timeout_at, deadline_at, retries, lease_until, fence, worker_id, wake_at, responses_received, responses_applied, error_code, error_message, created_at, updated_at, completed_at, suspended_from, suspend_requested, suspend_actor, suspend_reason, signal_wake, parent_id, root_id, continued_from, continued_as, traceparent)
    SELECT id, model, type, domain, tenant_id, business_key, batch_id, status, state, step, current_wait, next_retry_at, next_wait_timeout_at, deadline_at, retries, lease_until, fence, worker_id, wake_at, responses_received, responses_applied, error_code, error_message, created_at, updated_at, completed_at, suspended_from, suspend_requested, suspend_actor, suspend_reason, signal_wake, parent_id, root_id, continued_from, continued_as, traceparent FROM {schema}.execution;
DROP TABLE {schema}.execution;
ALTER TABLE {schema}.execution_next RENAME TO {schema}.execution;

CREATE INDEX {schema}.execution_wake_idx ON {schema}.execution (wake_at) WHERE wake_at IS NOT NULL;
CREATE INDEX {schema}.execution_retry_idx ON {schema}.execution (next_retry_at)
    WHERE status = 'WAITING_FOR_RETRY';
CREATE INDEX {schema}.execution_wait_timeout_idx ON {schema}.execution (next_wait_timeout_at)
    WHERE status = 'WAITING_FOR_ASYNC';
CREATE INDEX {schema}.execution_deadline_idx ON {schema}.execution (deadline_at)
    WHERE deadline_at IS NOT NULL AND completed_at IS NULL;
CREATE INDEX {schema}.execution_tsq_idx ON {schema}.execution (domain) WHERE status = 'WAITING_FOR_TSQ';
CREATE INDEX {schema}.execution_business_key_idx ON {schema}.execution (type, business_key)
    WHERE business_key IS NOT NULL;
CREATE INDEX {schema}.execution_batch_idx ON {schema}.execution (batch_id) WHERE batch_id IS NOT NULL;
CREATE INDEX {schema}.execution_created_idx ON {schema}.execution (created_at);
CREATE INDEX {schema}.execution_parent_idx ON {schema}.execution (parent_id)
    WHERE parent_id IS NOT NULL;
CREATE INDEX {schema}.execution_completed_idx ON {schema}.execution (completed_at)
    WHERE completed_at IS NOT NULL;
-- A tenant's queue, oldest first, and its held slots.
CREATE INDEX {schema}.execution_queued_idx ON {schema}.execution (tenant_id, created_at, id) WHERE status = 'QUEUED';
CREATE INDEX {schema}.execution_slot_idx ON {schema}.execution (tenant_id) WHERE holds_slot = 1;

-- The release: a slot holder reaching a terminal status, by whatever statement, gives up its
-- slot and hands it to its tenant's oldest queued executions (as many as the limit allows) in
-- the same transaction, woken at the time of the release.
CREATE TRIGGER {schema}.execution_slot_handoff AFTER UPDATE OF status ON {schema}.execution
WHEN OLD.holds_slot = 1 AND NEW.status IN ('COMPLETED', 'COMPENSATED', 'CANCELLED', 'FAILED')
BEGIN
    UPDATE {schema}.execution SET holds_slot = 0 WHERE id = NEW.id;
    UPDATE {schema}.execution SET status = 'PENDING', holds_slot = 1, admitted_at = NEW.updated_at,
        wake_at = NEW.updated_at, updated_at = NEW.updated_at
    WHERE id IN (
        SELECT q.id FROM {schema}.execution q
        WHERE q.tenant_id = NEW.tenant_id AND q.status = 'QUEUED'
        ORDER BY q.created_at, q.id
        LIMIT coalesce((
            SELECT max(0, coalesce(t.max_active_override, tt.max_active) -
                (SELECT count(*) FROM {schema}.execution h WHERE h.tenant_id = t.id AND h.holds_slot = 1))
            FROM {schema}.tenant t JOIN {schema}.tenant_tier tt ON tt.tier = t.tier
            WHERE t.id = NEW.tenant_id AND t.status = 'active'), 0));
    UPDATE {schema}.tenant SET last_admitted_at = NEW.updated_at
    WHERE id = NEW.tenant_id AND EXISTS (SELECT 1 FROM {schema}.execution a
        WHERE a.tenant_id = NEW.tenant_id AND a.holds_slot = 1 AND a.admitted_at = NEW.updated_at);
END;

-- Continue-as-new: the successor of an execution that held a slot (admitted_at is kept on every
-- admitted execution) starts QUEUED, and is admitted if its tenant has a free slot.
CREATE TRIGGER {schema}.execution_successor_queue AFTER INSERT ON {schema}.execution
WHEN NEW.continued_from IS NOT NULL AND EXISTS (SELECT 1 FROM {schema}.execution p
    WHERE p.id = NEW.continued_from AND p.admitted_at IS NOT NULL)
BEGIN
    UPDATE {schema}.execution SET status = 'QUEUED', wake_at = NULL WHERE id = NEW.id;
    UPDATE {schema}.execution SET status = 'PENDING', holds_slot = 1, admitted_at = NEW.updated_at,
        wake_at = NEW.updated_at, updated_at = NEW.updated_at
    WHERE id IN (
        SELECT q.id FROM {schema}.execution q
        WHERE q.tenant_id = NEW.tenant_id AND q.status = 'QUEUED'
        ORDER BY q.created_at, q.id
        LIMIT coalesce((
            SELECT max(0, coalesce(t.max_active_override, tt.max_active) -
                (SELECT count(*) FROM {schema}.execution h WHERE h.tenant_id = t.id AND h.holds_slot = 1))
            FROM {schema}.tenant t JOIN {schema}.tenant_tier tt ON tt.tier = t.tier
            WHERE t.id = NEW.tenant_id AND t.status = 'active'), 0));
END;
