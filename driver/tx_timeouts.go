package driver

import "time"

// TxTimeouts bound a transaction that a command handler opens on the database, so that a holder
// that stops (a frozen or partitioned worker) cannot keep its row locks for longer than its
// command's lease, and its waiters fail within theirs and retry instead of waiting for ever.
// A zero field leaves that bound unset. On PostgreSQL they are lock_timeout, statement_timeout
// and idle_in_transaction_session_timeout for the transaction only (SET LOCAL); SQLite has no
// such settings (its busy timeout bounds a wait for another connection's write lock).
type TxTimeouts struct {
	// Lock is the longest one statement waits for a lock held by another transaction.
	Lock time.Duration
	// Statement is the longest one statement runs.
	Statement time.Duration
	// IdleInTransaction is the longest the transaction stays open without running a statement;
	// past it the server ends the session, rolling the transaction back and freeing its locks.
	IdleInTransaction time.Duration
}
