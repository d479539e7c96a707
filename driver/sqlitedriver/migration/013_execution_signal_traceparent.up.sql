-- The W3C traceparent of whoever sent a signal; same column and meaning as the PostgreSQL
-- migration of the same number.
ALTER TABLE {schema}.execution_signal ADD COLUMN traceparent TEXT;
