ALTER TABLE {schema}.execution_signal DROP COLUMN traceparent;
