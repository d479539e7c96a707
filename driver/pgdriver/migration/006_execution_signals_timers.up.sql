-- Signals, durable timers and open waits of executions (any model).

-- Set when a signal arrives while a runner holds the execution: its release wakes the execution
-- again at once, so the signal is seen even if the runner read its signals before it arrived.
ALTER TABLE {schema}.execution ADD COLUMN IF NOT EXISTS signal_wake boolean NOT NULL DEFAULT false;

-- Named signals sent to an execution, durable the moment they arrive and buffered until a runner
-- consumes them in a checkpoint. The caller's signal id makes a resend a no-op.
CREATE TABLE {schema}.execution_signal (
    execution_id uuid NOT NULL,
    signal_id    text COLLATE "C" NOT NULL,
    name         text NOT NULL,
    payload      jsonb,
    received_at  timestamptz NOT NULL,
    consumed_at  timestamptz,
    PRIMARY KEY (execution_id, signal_id)
);
CREATE INDEX execution_signal_pending_idx ON {schema}.execution_signal (execution_id, received_at)
    WHERE consumed_at IS NULL;

-- Durable timers scheduled by runners. The earliest pending one sets the execution's wake_at
-- when its runner lets go, so the pending poller takes the execution up when it is due.
CREATE TABLE {schema}.execution_timer (
    execution_id uuid NOT NULL,
    timer_id     text COLLATE "C" NOT NULL,
    name         text NOT NULL DEFAULT '',
    fire_at      timestamptz NOT NULL,
    status       text NOT NULL CHECK (status IN ('PENDING', 'FIRED', 'CANCELLED')),
    created_at   timestamptz NOT NULL,
    fired_at     timestamptz,
    PRIMARY KEY (execution_id, timer_id)
);
CREATE INDEX execution_timer_pending_idx ON {schema}.execution_timer (execution_id, fire_at)
    WHERE status = 'PENDING';

-- The waits an execution has open (a reply, a signal, a timer, a child). A wait's timeout takes
-- part in wake_at like a timer; the runner decides what an expired wait means.
CREATE TABLE {schema}.execution_wait (
    execution_id uuid NOT NULL,
    wait_id      text COLLATE "C" NOT NULL,
    kind         text NOT NULL CHECK (kind IN ('REPLY', 'SIGNAL', 'TIMER', 'CHILD')),
    name         text NOT NULL DEFAULT '',
    timeout_at   timestamptz,
    opened_at    timestamptz NOT NULL,
    PRIMARY KEY (execution_id, wait_id)
);
