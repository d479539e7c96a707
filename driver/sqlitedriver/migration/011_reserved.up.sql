-- Reserved: another change takes number 011; this placeholder keeps the numbers without gaps
-- until it lands, and is removed then.
SELECT 1;
