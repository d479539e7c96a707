-- What a submission through the API asked for and answered, so that a repeat with the same
-- idempotency key replays the answer, and a repeat with another request is refused naming what
-- differs. Payments created before, and those of batches, have neither.
ALTER TABLE {t}payment ADD COLUMN request TEXT;
ALTER TABLE {t}payment ADD COLUMN response_status INTEGER;
ALTER TABLE {t}payment ADD COLUMN response_body TEXT;
