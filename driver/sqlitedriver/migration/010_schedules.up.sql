-- Durable schedules and leased job rows; same tables and meaning as the PostgreSQL migration of
-- the same number. Times are microseconds since the epoch, booleans 0/1.
CREATE TABLE {schema}.schedule (
    id                   TEXT PRIMARY KEY,
    name                 TEXT NOT NULL UNIQUE,
    model                TEXT NOT NULL,
    type                 TEXT NOT NULL,
    trigger_kind         TEXT NOT NULL CHECK (trigger_kind IN ('CRON', 'FIXED_RATE', 'FIXED_DELAY')),
    cron                 TEXT,
    zone                 TEXT,
    interval_ms          INTEGER NOT NULL DEFAULT 0 CHECK (interval_ms >= 0),
    initial_delay_ms     INTEGER NOT NULL DEFAULT 0 CHECK (initial_delay_ms >= 0),
    input                TEXT NOT NULL DEFAULT '{}',
    description          TEXT,
    enabled              INTEGER NOT NULL DEFAULT 1,
    misfire_policy       TEXT NOT NULL DEFAULT 'FIRE_ONCE' CHECK (misfire_policy IN ('FIRE_ONCE', 'FIRE_ALL', 'SKIP')),
    misfire_limit        INTEGER NOT NULL DEFAULT 0 CHECK (misfire_limit >= 0),
    source               TEXT NOT NULL DEFAULT 'API' CHECK (source IN ('API', 'DECLARED')),
    spec_hash            TEXT,
    next_fire_at         INTEGER,
    waiting_execution_id TEXT,
    last_fire_at         INTEGER,
    last_execution_id    TEXT,
    last_error           TEXT,
    fire_count           INTEGER NOT NULL DEFAULT 0,
    lease_until          INTEGER,
    lease_holder         TEXT,
    fence                INTEGER NOT NULL DEFAULT 0,
    created_at           INTEGER NOT NULL,
    updated_at           INTEGER NOT NULL
) STRICT;
CREATE INDEX {schema}.schedule_due_idx ON {schema}.schedule (next_fire_at) WHERE enabled = 1 AND next_fire_at IS NOT NULL;
CREATE INDEX {schema}.schedule_waiting_idx ON {schema}.schedule (waiting_execution_id) WHERE waiting_execution_id IS NOT NULL;

CREATE TABLE {schema}.job_lease (
    name             TEXT PRIMARY KEY,
    holder           TEXT,
    lease_until      INTEGER,
    next_run_at      INTEGER NOT NULL,
    last_holder      TEXT,
    last_started_at  INTEGER,
    last_finished_at INTEGER,
    last_error       TEXT,
    runs             INTEGER NOT NULL DEFAULT 0
) STRICT;
