ALTER TABLE {schema}.execution_log DROP COLUMN started_at;
