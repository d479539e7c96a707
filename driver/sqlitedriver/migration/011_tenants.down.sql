DROP TRIGGER IF EXISTS {schema}.execution_successor_queue;
DROP TRIGGER IF EXISTS {schema}.execution_slot_handoff;
DROP INDEX IF EXISTS {schema}.execution_slot_idx;
DROP INDEX IF EXISTS {schema}.execution_queued_idx;
UPDATE {schema}.execution SET status = 'PENDING', wake_at = CAST(unixepoch('subsec') * 1000000 AS INTEGER) WHERE status = 'QUEUED';
ALTER TABLE {schema}.execution DROP COLUMN admitted_at;
ALTER TABLE {schema}.execution DROP COLUMN holds_slot;
-- The execution table keeps QUEUED in its status CHECK (a rebuild is not worth undoing it).
DROP TABLE IF EXISTS {schema}.tenant;
DROP TABLE IF EXISTS {schema}.tenant_tier;
