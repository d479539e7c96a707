-- Operator suspension: the SUSPENDED status, the status a suspended execution had (restored by
-- the resume), and a pending request to suspend an execution a runner holds (its release stores
-- SUSPENDED), with who asked and why.
ALTER TABLE {schema}.execution DROP CONSTRAINT IF EXISTS execution_status_check;
ALTER TABLE {schema}.execution ADD CONSTRAINT execution_status_check CHECK (status IN ('PENDING',
    'EXECUTING', 'WAITING_FOR_ASYNC', 'WAITING_FOR_RETRY', 'WAITING_FOR_TSQ', 'COMPENSATING',
    'COMPENSATED', 'COMPLETED', 'CANCELLED', 'FAILED', 'SUSPENDED'));
ALTER TABLE {schema}.execution ADD COLUMN IF NOT EXISTS suspended_from text;
ALTER TABLE {schema}.execution ADD COLUMN IF NOT EXISTS suspend_requested boolean NOT NULL DEFAULT false;
ALTER TABLE {schema}.execution ADD COLUMN IF NOT EXISTS suspend_actor text;
ALTER TABLE {schema}.execution ADD COLUMN IF NOT EXISTS suspend_reason text;
