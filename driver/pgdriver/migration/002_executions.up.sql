-- The execution core: one row per process, saga, TCC transaction or workflow run, with its
-- user state, timers, lease and fence; an append-only log; and the async responses waiting to be
-- applied. Status changes are rare between checkpoints of one run, so a step checkpoint (state,
-- log) is usually a HOT update: no index below keys on a column a step checkpoint writes.
CREATE TABLE {schema}.execution (
    id                   uuid PRIMARY KEY,
    model                text COLLATE "C" NOT NULL,
    type                 text COLLATE "C" NOT NULL,
    domain               text COLLATE "C" NOT NULL,
    tenant_id            text,
    business_key         text COLLATE "C",
    batch_id             uuid,
    status               text NOT NULL CHECK (status IN ('PENDING', 'EXECUTING', 'WAITING_FOR_ASYNC',
                             'WAITING_FOR_RETRY', 'WAITING_FOR_TSQ', 'COMPENSATING', 'COMPENSATED',
                             'COMPLETED', 'CANCELLED', 'FAILED')),
    state                jsonb NOT NULL DEFAULT '{}'::jsonb,
    step                 text,
    current_wait         text,
    next_retry_at        timestamptz,
    next_wait_timeout_at timestamptz,
    deadline_at          timestamptz,
    retries              integer NOT NULL DEFAULT 0,
    lease_until          timestamptz,
    fence                bigint NOT NULL DEFAULT 0,
    worker_id            text,
    -- When a runner should take the execution up: set for new executions, when a response
    -- arrives, and to the lease's end while a runner holds it (so a dead runner's work is resumed).
    wake_at              timestamptz,
    responses_received   bigint NOT NULL DEFAULT 0,
    responses_applied    bigint NOT NULL DEFAULT 0,
    error_code           text,
    error_message        text,
    created_at           timestamptz NOT NULL DEFAULT now(),
    updated_at           timestamptz NOT NULL DEFAULT now(),
    completed_at         timestamptz
) WITH (fillfactor = 70);

-- The pending poller: new executions, arrived responses, expired runner leases.
CREATE INDEX execution_wake_idx ON {schema}.execution (wake_at) WHERE wake_at IS NOT NULL;
-- The retry poller.
CREATE INDEX execution_retry_idx ON {schema}.execution (next_retry_at)
    WHERE status = 'WAITING_FOR_RETRY';
-- The wait-timeout checker.
CREATE INDEX execution_wait_timeout_idx ON {schema}.execution (next_wait_timeout_at)
    WHERE status = 'WAITING_FOR_ASYNC';
-- The deadline checker.
CREATE INDEX execution_deadline_idx ON {schema}.execution (deadline_at)
    WHERE deadline_at IS NOT NULL AND completed_at IS NULL;
-- The process troubleshooting queue.
CREATE INDEX execution_tsq_idx ON {schema}.execution (domain) WHERE status = 'WAITING_FOR_TSQ';
CREATE INDEX execution_business_key_idx ON {schema}.execution (type, business_key)
    WHERE business_key IS NOT NULL;
CREATE INDEX execution_batch_idx ON {schema}.execution (batch_id) WHERE batch_id IS NOT NULL;
CREATE INDEX execution_created_brin ON {schema}.execution USING brin (created_at);

-- Append-only: STEP, WAIT, SIDE_EFFECT, COMMAND, ASYNC_RESPONSE, COMPENSATION, LIFECYCLE, TSQ_*.
-- Replay rebuilds completed steps, satisfied waits and side effects from it, in order.
CREATE TABLE {schema}.execution_log (
    execution_id  uuid NOT NULL,
    seq           integer NOT NULL,
    at            timestamptz NOT NULL,
    entry_type    text NOT NULL,
    name          text,
    step_status   text,
    attempt       integer,
    max_attempts  integer,
    request       jsonb,
    response      jsonb,
    error_code    text,
    error_message text,
    actor         text,
    reason        text,
    PRIMARY KEY (execution_id, seq)
);

-- Async responses, durable the moment they arrive; the runner applies them in order.
CREATE TABLE {schema}.execution_response (
    execution_id uuid NOT NULL,
    seq          bigint NOT NULL,
    name         text NOT NULL,
    payload      jsonb NOT NULL,
    received_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (execution_id, seq)
);
