DROP INDEX IF EXISTS {schema}.execution_completed_idx;
DROP TABLE IF EXISTS {schema}.execution_attribute;
