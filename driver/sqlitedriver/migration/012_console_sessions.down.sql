DROP TABLE IF EXISTS {schema}.console_session;
