DROP INDEX IF EXISTS {schema}.execution_parent_idx;
ALTER TABLE {schema}.execution DROP COLUMN IF EXISTS traceparent;
ALTER TABLE {schema}.execution DROP COLUMN IF EXISTS continued_as;
ALTER TABLE {schema}.execution DROP COLUMN IF EXISTS continued_from;
ALTER TABLE {schema}.execution DROP COLUMN IF EXISTS root_id;
ALTER TABLE {schema}.execution DROP COLUMN IF EXISTS parent_id;
