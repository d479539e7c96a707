-- Custom search attributes: short key/value pairs an execution carries so that it can be found by
-- business data (a customer id, an order number). Set when the execution is created and by its
-- checkpoints; searched by exact (key, value).
CREATE TABLE {schema}.execution_attribute (
    execution_id uuid NOT NULL,
    key          text COLLATE "C" NOT NULL,
    value        text COLLATE "C" NOT NULL,
    PRIMARY KEY (execution_id, key)
);
CREATE INDEX execution_attribute_search_idx ON {schema}.execution_attribute (key, value);

-- Retention: ended executions, oldest first. completed_at is set once, when an execution ends, so
-- the index does not stop step checkpoints from being HOT updates.
CREATE INDEX execution_completed_idx ON {schema}.execution (completed_at)
    WHERE completed_at IS NOT NULL;
