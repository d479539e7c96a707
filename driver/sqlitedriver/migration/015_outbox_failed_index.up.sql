-- The dead letters of the outbox, so the backlog reads the unpublished and the failed rows through
-- their partial indexes, not the whole table; same index as the PostgreSQL migration of the same
-- number.
CREATE INDEX IF NOT EXISTS {schema}.outbox_failed_idx ON {schema}.outbox (id) WHERE status = 'FAILED';
