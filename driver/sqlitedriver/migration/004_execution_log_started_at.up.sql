-- When the work a log entry records began (a step's attempt), in microseconds since the epoch;
-- at is when it ended.
ALTER TABLE {schema}.execution_log ADD COLUMN started_at INTEGER;
