DROP TABLE IF EXISTS {schema}.job_lease;
DROP TABLE IF EXISTS {schema}.schedule;
