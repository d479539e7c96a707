ALTER TABLE {schema}.execution_signal DROP COLUMN IF EXISTS traceparent;
