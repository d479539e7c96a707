-- The command bus: one table is both the queue and the command's record (PGMQ semantics: a
-- claimed row becomes visible again when its lease runs out), plus batches and the operator
-- audit log. Same columns, checks and indexes as the PostgreSQL migration of the same number,
-- in SQLite types: timestamps are INTEGER unix microseconds (UTC; the defaults have millisecond
-- precision, the driver always passes its own), UUIDs and JSON are TEXT. "{schema}." becomes the
-- table prefix "commandbus_".
CREATE TABLE {schema}.command (
    id              TEXT PRIMARY KEY NOT NULL,
    kind            TEXT NOT NULL DEFAULT 'command' CHECK (kind IN ('command', 'reply')),
    domain          TEXT NOT NULL,
    queue           TEXT NOT NULL,
    command_type    TEXT NOT NULL,
    data            TEXT NOT NULL DEFAULT '{}',
    correlation_id  TEXT,
    causation_id    TEXT,
    reply_to        TEXT,
    status          TEXT NOT NULL CHECK (status IN ('PENDING', 'RUNNING', 'COMPLETED', 'FAILED', 'IN_TSQ', 'CANCELLED', 'TIMED_OUT')),
    attempt         INTEGER NOT NULL DEFAULT 0,
    max_attempts    INTEGER NOT NULL CHECK (max_attempts > 0),
    tenant_id       TEXT,
    batch_id        TEXT,
    headers         TEXT,
    idempotency_key TEXT,
    sent_by         TEXT,
    visible_at      INTEGER NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000000 AS INTEGER)),
    lease_until     INTEGER,
    fence           INTEGER NOT NULL DEFAULT 0,
    worker_id       TEXT,
    result          TEXT,
    error_code      TEXT,
    error_message   TEXT,
    deadline_at     INTEGER,
    -- Set while the command waits in the troubleshooting queue.
    parked_at       INTEGER,
    -- Transition history, appended by the same statement that makes the transition. The send,
    -- the claim in progress and a handler's COMPLETED/FAILED outcome are not stored here: their
    -- facts are the columns above and driver.CurrentAudit rebuilds them.
    audit           TEXT NOT NULL DEFAULT '[]',
    created_at      INTEGER NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000000 AS INTEGER)),
    updated_at      INTEGER NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000000 AS INTEGER)),
    started_at      INTEGER,
    completed_at    INTEGER
) STRICT;

-- Claiming: unfinished rows of a queue in due order. Status and the lease are not indexed, so a
-- claim rewrites no index entry. Finished and parked rows leave the index.
CREATE INDEX {schema}.command_claim_idx ON {schema}.command (queue, visible_at)
    WHERE completed_at IS NULL AND parked_at IS NULL;
-- An idempotency key is unique per domain.
CREATE UNIQUE INDEX {schema}.command_idempotency_idx ON {schema}.command (domain, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
CREATE INDEX {schema}.command_correlation_idx ON {schema}.command (correlation_id)
    WHERE correlation_id IS NOT NULL;
CREATE INDEX {schema}.command_batch_idx ON {schema}.command (batch_id)
    WHERE batch_id IS NOT NULL;
-- Time-window statistics.
CREATE INDEX {schema}.command_created_idx ON {schema}.command (created_at);
-- The troubleshooting queue.
CREATE INDEX {schema}.command_tsq_idx ON {schema}.command (domain, parked_at)
    WHERE parked_at IS NOT NULL;

CREATE TABLE {schema}.batch (
    id           TEXT PRIMARY KEY NOT NULL,
    name         TEXT NOT NULL DEFAULT '',
    domain       TEXT NOT NULL DEFAULT '',
    tenant_id    TEXT,
    total        INTEGER NOT NULL DEFAULT 0,
    created_at   INTEGER NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000000 AS INTEGER)),
    completed_at INTEGER
) STRICT;
CREATE INDEX {schema}.batch_created_idx ON {schema}.batch (created_at);

CREATE TABLE {schema}.audit_log (
    -- AUTOINCREMENT never reuses an id, like a PostgreSQL bigserial.
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    at          INTEGER NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000000 AS INTEGER)),
    entity_type TEXT NOT NULL,
    entity_id   TEXT NOT NULL,
    action      TEXT NOT NULL,
    actor       TEXT NOT NULL,
    reason      TEXT NOT NULL DEFAULT '',
    details     TEXT
) STRICT;
CREATE INDEX {schema}.audit_log_entity_idx ON {schema}.audit_log (entity_type, entity_id, id);
