-- The participant-side TCC barrier: one row per phase a participant's branch applied, written in
-- the participant's own transaction so that duplicated phases are recognised. An empty cancel
-- (a cancel with no try before it) writes the branch's TRY row with origin CANCEL, so that a try
-- arriving after its cancel is refused.
CREATE TABLE {schema}.tcc_barrier (
    transaction_id text COLLATE "C" NOT NULL,
    participant    text COLLATE "C" NOT NULL,
    phase          text NOT NULL CHECK (phase IN ('TRY', 'CONFIRM', 'CANCEL')),
    origin         text NOT NULL CHECK (origin IN ('TRY', 'CONFIRM', 'CANCEL')),
    created_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (transaction_id, participant, phase)
);
