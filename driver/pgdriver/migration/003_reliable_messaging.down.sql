DROP TABLE IF EXISTS {schema}.command_dlq;
DROP TABLE IF EXISTS {schema}.inbox;
DROP TABLE IF EXISTS {schema}.outbox;
