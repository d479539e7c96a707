-- Custom search attributes: short key/value pairs an execution carries so that it can be found by
-- business data (a customer id, an order number). Same table and indexes as the PostgreSQL
-- migration of the same number.
CREATE TABLE {schema}.execution_attribute (
    execution_id TEXT NOT NULL,
    key          TEXT NOT NULL,
    value        TEXT NOT NULL,
    PRIMARY KEY (execution_id, key)
) STRICT;
CREATE INDEX {schema}.execution_attribute_search_idx ON {schema}.execution_attribute (key, value);

-- Retention: ended executions, oldest first.
CREATE INDEX {schema}.execution_completed_idx ON {schema}.execution (completed_at)
    WHERE completed_at IS NOT NULL;
