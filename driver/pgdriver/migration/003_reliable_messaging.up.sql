-- Reliable messaging (seed 004): the transactional outbox the relay publishes to AMQP and Kafka,
-- the inbox consumers dedupe deliveries with, and the dead-letter record of parked commands.

-- A message waiting to be published, written in the transaction of the change it announces.
-- txid is the writing transaction: the relay publishes rows in (txid, id) order and only below
-- the oldest transaction still running, so a row whose transaction commits after a later id's
-- is never overtaken within its key, and never skipped.
CREATE TABLE {schema}.outbox (
    id           bigserial PRIMARY KEY,
    category     text NOT NULL CHECK (category IN ('command', 'reply', 'event')),
    transport    text COLLATE "C" NOT NULL,
    topic        text NOT NULL,
    key          text COLLATE "C",
    type         text NOT NULL,
    message_id   text NOT NULL,
    payload      jsonb NOT NULL,
    headers      jsonb NOT NULL DEFAULT '{}'::jsonb,
    status       text NOT NULL DEFAULT 'NEW' CHECK (status IN ('NEW', 'PUBLISHED', 'FAILED')),
    attempts     integer NOT NULL DEFAULT 0,
    next_at      timestamptz,
    locked_until timestamptz,
    locked_by    text,
    last_error   text,
    txid         xid8 NOT NULL DEFAULT pg_current_xact_id(),
    -- The statement's clock, not the transaction's start: the closest the row has to its commit.
    created_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
    published_at timestamptz
);
-- Dispatch: unpublished rows in publication order; published rows leave the index.
CREATE INDEX outbox_dispatch_idx ON {schema}.outbox (txid, id) WHERE status = 'NEW';
-- The head of each key: a row is published only when no earlier row of its key is unpublished.
CREATE INDEX outbox_key_idx ON {schema}.outbox (key, txid, id) WHERE status = 'NEW';
-- Retention: published rows are purged by age.
CREATE INDEX outbox_published_idx ON {schema}.outbox (published_at) WHERE status = 'PUBLISHED';

-- Idempotent receiver: the first write of (message_id, handler) wins, in the transaction of the
-- handler's effects.
CREATE TABLE {schema}.inbox (
    message_id   text COLLATE "C" NOT NULL,
    handler      text COLLATE "C" NOT NULL,
    processed_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (message_id, handler)
);
CREATE INDEX inbox_processed_idx ON {schema}.inbox (processed_at);

-- The dead-letter record of commands parked in the troubleshooting queue: written by the same
-- statement that moves a command to IN_TSQ, removed by the one that moves it out.
CREATE TABLE {schema}.command_dlq (
    command_id uuid PRIMARY KEY,
    parked_at  timestamptz NOT NULL DEFAULT now(),
    parked_by  text,
    attempts   integer NOT NULL,
    error      text
);
CREATE INDEX command_dlq_parked_idx ON {schema}.command_dlq (parked_at);

-- Commands already parked before this migration get their record.
INSERT INTO {schema}.command_dlq (command_id, parked_at, parked_by, attempts, error)
SELECT id, parked_at, worker_id, attempt, concat_ws(': ', error_code, error_message)
FROM {schema}.command WHERE status = 'IN_TSQ' AND parked_at IS NOT NULL;
