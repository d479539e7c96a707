DROP TABLE IF EXISTS {t}role_lease;
DROP TABLE IF EXISTS {t}fxsim_contract;
