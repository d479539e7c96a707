DROP INDEX IF EXISTS {schema}.outbox_failed_idx;
