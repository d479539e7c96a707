-- The W3C traceparent of whoever sent a signal (the request or span that called send), so the run
-- the signal resumes links to the sender's trace. NULL for a signal sent outside any trace.
ALTER TABLE {schema}.execution_signal ADD COLUMN IF NOT EXISTS traceparent text;
