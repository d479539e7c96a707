-- The operator console's sign-in sessions: the cookie holds an opaque id, the table its SHA-256,
-- so every replica knows a session and a sign-out ends it everywhere. token_digest is the SHA-256
-- of the token signed in with: a token removed from the configuration ends its sessions.
CREATE TABLE {schema}.console_session (
    id_hash      text COLLATE "C" PRIMARY KEY,
    subject      text NOT NULL,
    token_digest text COLLATE "C" NOT NULL,
    created_at   timestamptz NOT NULL,
    expires_at   timestamptz NOT NULL
);
CREATE INDEX console_session_expires_at ON {schema}.console_session (expires_at);
