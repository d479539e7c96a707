-- The operator console's sign-in sessions; same table and meaning as the PostgreSQL migration of
-- the same number. Times are microseconds since the epoch.
CREATE TABLE {schema}.console_session (
    id_hash      TEXT PRIMARY KEY,
    subject      TEXT NOT NULL,
    token_digest TEXT NOT NULL,
    created_at   INTEGER NOT NULL,
    expires_at   INTEGER NOT NULL
);
CREATE INDEX {schema}.console_session_expires_at ON {schema}.console_session (expires_at);
