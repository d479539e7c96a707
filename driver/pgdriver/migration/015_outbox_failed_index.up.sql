-- The dead letters of the outbox (messages the relay gave up on), so the backlog the relay reports
-- every few seconds reads the unpublished and the failed rows through their partial indexes. It
-- used to filter the whole table for status IN ('NEW', 'FAILED'): published rows stay until
-- retention, and in a 10-minute soak each of those reads took 390 ms.
CREATE INDEX IF NOT EXISTS outbox_failed_idx ON {schema}.outbox (id) WHERE status = 'FAILED';
