ALTER TABLE {t}payment DROP COLUMN response_body;
ALTER TABLE {t}payment DROP COLUMN response_status;
ALTER TABLE {t}payment DROP COLUMN request;
