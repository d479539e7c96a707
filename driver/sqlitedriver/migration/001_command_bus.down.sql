DROP TABLE IF EXISTS {schema}.audit_log;
DROP TABLE IF EXISTS {schema}.batch;
DROP TABLE IF EXISTS {schema}.command;
