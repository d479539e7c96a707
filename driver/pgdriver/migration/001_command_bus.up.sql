-- The command bus: one table is both the queue and the command's record (PGMQ semantics: a
-- claimed row becomes visible again when its lease runs out), plus batches and the operator
-- audit log.
CREATE TABLE {schema}.command (
    id              uuid PRIMARY KEY,
    kind            text NOT NULL DEFAULT 'command' CHECK (kind IN ('command', 'reply')),
    -- Key columns use the "C" collation: byte comparisons, whatever the database's locale, keep
    -- index maintenance cheap on the hot path.
    domain          text COLLATE "C" NOT NULL,
    queue           text COLLATE "C" NOT NULL,
    command_type    text NOT NULL,
    data            jsonb NOT NULL DEFAULT '{}'::jsonb,
    correlation_id  uuid,
    causation_id    uuid,
    reply_to        text,
    status          text NOT NULL CHECK (status IN ('PENDING', 'RUNNING', 'COMPLETED', 'FAILED', 'IN_TSQ', 'CANCELLED', 'TIMED_OUT')),
    attempt         integer NOT NULL DEFAULT 0,
    max_attempts    integer NOT NULL CHECK (max_attempts > 0),
    tenant_id       text,
    batch_id        uuid,
    headers         jsonb,
    idempotency_key text COLLATE "C",
    sent_by         text,
    visible_at      timestamptz NOT NULL DEFAULT now(),
    lease_until     timestamptz,
    fence           bigint NOT NULL DEFAULT 0,
    worker_id       text,
    result          jsonb,
    error_code      text,
    error_message   text,
    deadline_at     timestamptz,
    -- Set while the command waits in the troubleshooting queue.
    parked_at       timestamptz,
    -- Transition history, appended by the same statement that makes the transition. The send,
    -- the claim in progress and a handler's COMPLETED/FAILED outcome are not stored here: their
    -- facts are the columns above and driver.CurrentAudit rebuilds them.
    audit           jsonb NOT NULL DEFAULT '[]'::jsonb,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    started_at      timestamptz,
    completed_at    timestamptz
) WITH (fillfactor = 50);

-- Claiming: unfinished rows of a queue in due order. A claim changes no indexed column (status
-- and the lease are not indexed), so it is a HOT update; the spare page space left by the
-- fillfactor is what makes that possible. Finished and parked rows leave the index.
CREATE INDEX command_claim_idx ON {schema}.command (queue, visible_at)
    WHERE completed_at IS NULL AND parked_at IS NULL;
-- An idempotency key is unique per domain.
CREATE UNIQUE INDEX command_idempotency_idx ON {schema}.command (domain, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
CREATE INDEX command_correlation_idx ON {schema}.command (correlation_id)
    WHERE correlation_id IS NOT NULL;
CREATE INDEX command_batch_idx ON {schema}.command (batch_id)
    WHERE batch_id IS NOT NULL;
-- Time-window statistics. BRIN costs almost nothing to maintain on an append-mostly table.
CREATE INDEX command_created_brin ON {schema}.command USING brin (created_at);
-- The troubleshooting queue.
CREATE INDEX command_tsq_idx ON {schema}.command (domain, parked_at)
    WHERE parked_at IS NOT NULL;

CREATE TABLE {schema}.batch (
    id           uuid PRIMARY KEY,
    name         text NOT NULL DEFAULT '',
    domain       text NOT NULL DEFAULT '',
    tenant_id    text,
    total        bigint NOT NULL DEFAULT 0,
    created_at   timestamptz NOT NULL DEFAULT now(),
    completed_at timestamptz
);
CREATE INDEX batch_created_idx ON {schema}.batch (created_at);

CREATE TABLE {schema}.audit_log (
    id          bigserial PRIMARY KEY,
    at          timestamptz NOT NULL DEFAULT now(),
    entity_type text NOT NULL,
    entity_id   text NOT NULL,
    action      text NOT NULL,
    actor       text NOT NULL,
    reason      text NOT NULL DEFAULT '',
    details     jsonb
);
CREATE INDEX audit_log_entity_idx ON {schema}.audit_log (entity_type, entity_id, id);
