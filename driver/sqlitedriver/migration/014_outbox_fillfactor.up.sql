-- The PostgreSQL migration of the same number leaves room on the outbox's pages for the relay's
-- updates (fillfactor). SQLite has no such setting; this keeps the two drivers' versions in step.
SELECT 1;
