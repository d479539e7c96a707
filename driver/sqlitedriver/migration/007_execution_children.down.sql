DROP INDEX IF EXISTS {schema}.execution_parent_idx;
ALTER TABLE {schema}.execution DROP COLUMN traceparent;
ALTER TABLE {schema}.execution DROP COLUMN continued_as;
ALTER TABLE {schema}.execution DROP COLUMN continued_from;
ALTER TABLE {schema}.execution DROP COLUMN root_id;
ALTER TABLE {schema}.execution DROP COLUMN parent_id;
