-- Placeholder: number 009 is reserved for another change being developed in parallel; the
-- migrator needs contiguous numbers. It changes nothing.
SELECT 1;
