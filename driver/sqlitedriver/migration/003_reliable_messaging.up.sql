-- Reliable messaging (seed 004): the transactional outbox, the inbox and the dead-letter record
-- of parked commands. Same tables as the PostgreSQL migration of the same number, in SQLite
-- types. SQLite has one writer, so transactions commit in id order and the outbox needs no
-- transaction id column.
CREATE TABLE {schema}.outbox (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    category     TEXT NOT NULL CHECK (category IN ('command', 'reply', 'event')),
    transport    TEXT NOT NULL,
    topic        TEXT NOT NULL,
    key          TEXT,
    type         TEXT NOT NULL,
    message_id   TEXT NOT NULL,
    payload      TEXT NOT NULL,
    headers      TEXT NOT NULL DEFAULT '{}',
    status       TEXT NOT NULL DEFAULT 'NEW' CHECK (status IN ('NEW', 'PUBLISHED', 'FAILED')),
    attempts     INTEGER NOT NULL DEFAULT 0,
    next_at      INTEGER,
    locked_until INTEGER,
    locked_by    TEXT,
    last_error   TEXT,
    created_at   INTEGER NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000000 AS INTEGER)),
    published_at INTEGER
) STRICT;
CREATE INDEX {schema}.outbox_dispatch_idx ON {schema}.outbox (id) WHERE status = 'NEW';
CREATE INDEX {schema}.outbox_key_idx ON {schema}.outbox (key, id) WHERE status = 'NEW';
CREATE INDEX {schema}.outbox_published_idx ON {schema}.outbox (published_at) WHERE status = 'PUBLISHED';

CREATE TABLE {schema}.inbox (
    message_id   TEXT NOT NULL,
    handler      TEXT NOT NULL,
    processed_at INTEGER NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000000 AS INTEGER)),
    PRIMARY KEY (message_id, handler)
) STRICT;
CREATE INDEX {schema}.inbox_processed_idx ON {schema}.inbox (processed_at);

CREATE TABLE {schema}.command_dlq (
    command_id TEXT PRIMARY KEY NOT NULL,
    parked_at  INTEGER NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000000 AS INTEGER)),
    parked_by  TEXT,
    attempts   INTEGER NOT NULL,
    error      TEXT
) STRICT;
CREATE INDEX {schema}.command_dlq_parked_idx ON {schema}.command_dlq (parked_at);

INSERT INTO {schema}.command_dlq (command_id, parked_at, parked_by, attempts, error)
SELECT id, parked_at, worker_id, attempt,
    CASE WHEN error_code IS NULL THEN error_message
         WHEN error_message IS NULL THEN error_code
         ELSE error_code || ': ' || error_message END
FROM {schema}.command WHERE status = 'IN_TSQ' AND parked_at IS NOT NULL;
