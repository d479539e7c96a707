-- Durable schedules: each row starts executions of one (model, type) on a cron expression (with
-- seconds and a time zone), at a fixed rate, or with a fixed delay after the previous execution
-- ended. A replica claims a due schedule (FOR UPDATE SKIP LOCKED, a short lease and a fence),
-- starts the executions of its due ticks with ids derived from the schedule and the tick, and
-- writes the next fire time under the fence, so a tick starts one execution however many
-- replicas run.
CREATE TABLE {schema}.schedule (
    id                   uuid PRIMARY KEY,
    name                 text COLLATE "C" NOT NULL UNIQUE,
    model                text COLLATE "C" NOT NULL,
    type                 text COLLATE "C" NOT NULL,
    trigger_kind         text NOT NULL CHECK (trigger_kind IN ('CRON', 'FIXED_RATE', 'FIXED_DELAY')),
    cron                 text,
    zone                 text,
    interval_ms          bigint NOT NULL DEFAULT 0 CHECK (interval_ms >= 0),
    initial_delay_ms     bigint NOT NULL DEFAULT 0 CHECK (initial_delay_ms >= 0),
    input                jsonb NOT NULL DEFAULT '{}'::jsonb,
    description          text,
    enabled              boolean NOT NULL DEFAULT true,
    misfire_policy       text NOT NULL DEFAULT 'FIRE_ONCE' CHECK (misfire_policy IN ('FIRE_ONCE', 'FIRE_ALL', 'SKIP')),
    misfire_limit        integer NOT NULL DEFAULT 0 CHECK (misfire_limit >= 0),
    source               text NOT NULL DEFAULT 'API' CHECK (source IN ('API', 'DECLARED')),
    spec_hash            text,
    -- The next tick; NULL while a fixed-delay schedule waits for its execution to end.
    next_fire_at         timestamptz,
    waiting_execution_id uuid,
    last_fire_at         timestamptz,
    last_execution_id    uuid,
    last_error           text,
    fire_count           bigint NOT NULL DEFAULT 0,
    lease_until          timestamptz,
    lease_holder         text,
    fence                bigint NOT NULL DEFAULT 0,
    created_at           timestamptz NOT NULL DEFAULT now(),
    updated_at           timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX schedule_due_idx ON {schema}.schedule (next_fire_at) WHERE enabled AND next_fire_at IS NOT NULL;
CREATE INDEX schedule_waiting_idx ON {schema}.schedule (waiting_execution_id) WHERE waiting_execution_id IS NOT NULL;

-- Leased job rows: a periodic job that must run once per tick across replicas (retention, the
-- watchdog, the stale-work report) takes its row before it runs; the row shows who holds it and
-- when the job runs next.
CREATE TABLE {schema}.job_lease (
    name             text COLLATE "C" PRIMARY KEY,
    holder           text,
    lease_until      timestamptz,
    next_run_at      timestamptz NOT NULL DEFAULT now(),
    last_holder      text,
    last_started_at  timestamptz,
    last_finished_at timestamptz,
    last_error       text,
    runs             bigint NOT NULL DEFAULT 0
);
