ALTER TABLE {schema}.execution_log DROP COLUMN IF EXISTS started_at;
