-- Child executions, continue-as-new and trace context: the columns and index of the PostgreSQL
-- migration of the same number, UUIDs as TEXT. root_id is NULL on rows written before this
-- migration and read as the execution's own id.
ALTER TABLE {schema}.execution ADD COLUMN parent_id TEXT;
ALTER TABLE {schema}.execution ADD COLUMN root_id TEXT;
ALTER TABLE {schema}.execution ADD COLUMN continued_from TEXT;
ALTER TABLE {schema}.execution ADD COLUMN continued_as TEXT;
ALTER TABLE {schema}.execution ADD COLUMN traceparent TEXT;

-- Listing an execution's children, and cancelling them with it.
CREATE INDEX {schema}.execution_parent_idx ON {schema}.execution (parent_id)
    WHERE parent_id IS NOT NULL;
