-- Signals, durable timers and open waits of executions (any model). Same tables as the
-- PostgreSQL migration of the same number, in SQLite types.

-- Set when a signal arrives while a runner holds the execution: its release wakes the execution
-- again at once, so the signal is seen even if the runner read its signals before it arrived.
ALTER TABLE {schema}.execution ADD COLUMN signal_wake INTEGER NOT NULL DEFAULT 0;

-- Named signals sent to an execution, buffered until a runner consumes them in a checkpoint.
CREATE TABLE {schema}.execution_signal (
    execution_id TEXT NOT NULL,
    signal_id    TEXT NOT NULL,
    name         TEXT NOT NULL,
    payload      TEXT,
    received_at  INTEGER NOT NULL,
    consumed_at  INTEGER,
    PRIMARY KEY (execution_id, signal_id)
) STRICT;
CREATE INDEX {schema}.execution_signal_pending_idx ON {schema}.execution_signal (execution_id, received_at)
    WHERE consumed_at IS NULL;

-- Durable timers scheduled by runners; the earliest pending one sets wake_at on release.
CREATE TABLE {schema}.execution_timer (
    execution_id TEXT NOT NULL,
    timer_id     TEXT NOT NULL,
    name         TEXT NOT NULL DEFAULT '',
    fire_at      INTEGER NOT NULL,
    status       TEXT NOT NULL CHECK (status IN ('PENDING', 'FIRED', 'CANCELLED')),
    created_at   INTEGER NOT NULL,
    fired_at     INTEGER,
    PRIMARY KEY (execution_id, timer_id)
) STRICT;
CREATE INDEX {schema}.execution_timer_pending_idx ON {schema}.execution_timer (execution_id, fire_at)
    WHERE status = 'PENDING';

-- The waits an execution has open; a wait's timeout takes part in wake_at like a timer.
CREATE TABLE {schema}.execution_wait (
    execution_id TEXT NOT NULL,
    wait_id      TEXT NOT NULL,
    kind         TEXT NOT NULL CHECK (kind IN ('REPLY', 'SIGNAL', 'TIMER', 'CHILD')),
    name         TEXT NOT NULL DEFAULT '',
    timeout_at   INTEGER,
    opened_at    INTEGER NOT NULL,
    PRIMARY KEY (execution_id, wait_id)
) STRICT;
