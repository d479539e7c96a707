DROP TABLE IF EXISTS {schema}.execution_response;
DROP TABLE IF EXISTS {schema}.execution_log;
DROP TABLE IF EXISTS {schema}.execution;
