DROP TABLE IF EXISTS {schema}.tcc_barrier;
