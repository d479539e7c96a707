-- The participant-side TCC barrier. Same table as the PostgreSQL migration of the same number.
CREATE TABLE {schema}.tcc_barrier (
    transaction_id TEXT NOT NULL,
    participant    TEXT NOT NULL,
    phase          TEXT NOT NULL CHECK (phase IN ('TRY', 'CONFIRM', 'CANCEL')),
    origin         TEXT NOT NULL CHECK (origin IN ('TRY', 'CONFIRM', 'CANCEL')),
    created_at     INTEGER NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000000 AS INTEGER)),
    PRIMARY KEY (transaction_id, participant, phase)
) STRICT;
