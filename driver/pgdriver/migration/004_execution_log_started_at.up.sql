-- When the work a log entry records began (a step's attempt); at is when it ended.
ALTER TABLE {schema}.execution_log ADD COLUMN IF NOT EXISTS started_at timestamptz;
