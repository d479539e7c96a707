-- Placeholder (see the up migration): nothing to undo.
SELECT 1;
