-- Suspended executions get back the status they had; a pending request is dropped.
UPDATE {schema}.execution SET status = suspended_from WHERE status = 'SUSPENDED';
ALTER TABLE {schema}.execution DROP COLUMN IF EXISTS suspend_reason;
ALTER TABLE {schema}.execution DROP COLUMN IF EXISTS suspend_actor;
ALTER TABLE {schema}.execution DROP COLUMN IF EXISTS suspend_requested;
ALTER TABLE {schema}.execution DROP COLUMN IF EXISTS suspended_from;
ALTER TABLE {schema}.execution DROP CONSTRAINT IF EXISTS execution_status_check;
ALTER TABLE {schema}.execution ADD CONSTRAINT execution_status_check CHECK (status IN ('PENDING',
    'EXECUTING', 'WAITING_FOR_ASYNC', 'WAITING_FOR_RETRY', 'WAITING_FOR_TSQ', 'COMPENSATING',
    'COMPENSATED', 'COMPLETED', 'CANCELLED', 'FAILED'));
