-- Child executions, continue-as-new and trace context. parent_id is the execution that started
-- this one in its checkpoint, root_id the top of its tree (its own id for a top-level execution;
-- NULL on rows written before this migration, read as the own id). continued_from is the
-- execution this one continues (continue-as-new) and continued_as its successor. traceparent is
-- the W3C trace context of the request that started the execution; the commands it sends carry it.
-- No checkpoint writes these columns (continued_as aside, once), so step checkpoints stay HOT
-- updates.
ALTER TABLE {schema}.execution ADD COLUMN IF NOT EXISTS parent_id uuid;
ALTER TABLE {schema}.execution ADD COLUMN IF NOT EXISTS root_id uuid;
ALTER TABLE {schema}.execution ADD COLUMN IF NOT EXISTS continued_from uuid;
ALTER TABLE {schema}.execution ADD COLUMN IF NOT EXISTS continued_as uuid;
ALTER TABLE {schema}.execution ADD COLUMN IF NOT EXISTS traceparent text;

-- Listing an execution's children, and cancelling them with it.
CREATE INDEX IF NOT EXISTS execution_parent_idx ON {schema}.execution (parent_id)
    WHERE parent_id IS NOT NULL;
