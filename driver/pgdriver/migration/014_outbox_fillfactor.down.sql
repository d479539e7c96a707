ALTER TABLE {schema}.outbox RESET (fillfactor);
