DROP TABLE IF EXISTS {schema}.execution_wait;
DROP TABLE IF EXISTS {schema}.execution_timer;
DROP TABLE IF EXISTS {schema}.execution_signal;
ALTER TABLE {schema}.execution DROP COLUMN IF EXISTS signal_wake;
