DROP TRIGGER IF EXISTS execution_successor_admit ON {schema}.execution;
DROP TRIGGER IF EXISTS execution_successor_queue ON {schema}.execution;
DROP FUNCTION IF EXISTS {schema}.execution_successor_admit();
DROP FUNCTION IF EXISTS {schema}.execution_successor_queue();
DROP TRIGGER IF EXISTS execution_slot_handoff ON {schema}.execution;
DROP TRIGGER IF EXISTS execution_slot_release ON {schema}.execution;
DROP FUNCTION IF EXISTS {schema}.execution_slot_handoff();
DROP FUNCTION IF EXISTS {schema}.execution_slot_release();
DROP FUNCTION IF EXISTS {schema}.tenant_admit(text, timestamptz, boolean, integer);
DROP INDEX IF EXISTS {schema}.execution_slot_idx;
DROP INDEX IF EXISTS {schema}.execution_queued_idx;
UPDATE {schema}.execution SET status = 'PENDING', wake_at = now() WHERE status = 'QUEUED';
ALTER TABLE {schema}.execution DROP COLUMN IF EXISTS admitted_at;
ALTER TABLE {schema}.execution DROP COLUMN IF EXISTS holds_slot;
ALTER TABLE {schema}.execution DROP CONSTRAINT IF EXISTS execution_status_check;
ALTER TABLE {schema}.execution ADD CONSTRAINT execution_status_check CHECK (status IN ('PENDING',
    'EXECUTING', 'WAITING_FOR_ASYNC', 'WAITING_FOR_RETRY', 'WAITING_FOR_TSQ', 'COMPENSATING',
    'COMPENSATED', 'COMPLETED', 'CANCELLED', 'FAILED', 'SUSPENDED'));
DROP TABLE IF EXISTS {schema}.tenant;
DROP TABLE IF EXISTS {schema}.tenant_tier;
