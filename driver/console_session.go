package driver

import (
	"context"
	"time"
)

// ConsoleSessionExecutor keeps the operator console's sign-in sessions in the database, so that
// every replica knows them and a sign-out ends a session everywhere. A session is addressed by
// the SHA-256 of its opaque id, never by the id itself: the id lives only in the browser's cookie.
type ConsoleSessionExecutor interface {
	// ConsoleSessionInsert records a new session.
	ConsoleSessionInsert(ctx context.Context, params *ConsoleSessionInsertParams) error
	// ConsoleSessionGet returns the session whose id hashes to IDHash and that has not expired
	// at Now, or ErrNotFound.
	ConsoleSessionGet(ctx context.Context, params *ConsoleSessionGetParams) (*ConsoleSessionRow, error)
	// ConsoleSessionDelete ends a session (sign-out) and reports whether it existed.
	ConsoleSessionDelete(ctx context.Context, idHash string) (bool, error)
	// ConsoleSessionDeleteExpired deletes the sessions expired at now and returns how many.
	ConsoleSessionDeleteExpired(ctx context.Context, now time.Time) (int64, error)
}

// ConsoleSessionInsertParams is a new console session.
type ConsoleSessionInsertParams struct {
	// IDHash is the hex SHA-256 of the session's id.
	IDHash string
	// Subject is who signed in; TokenDigest is the hex SHA-256 of the token they signed in with,
	// so that a token removed from the configuration ends its sessions.
	Subject     string
	TokenDigest string
	CreatedAt   time.Time
	ExpiresAt   time.Time
}

// ConsoleSessionGetParams finds a live session.
type ConsoleSessionGetParams struct {
	IDHash string
	Now    time.Time
}

// ConsoleSessionRow is a console session.
type ConsoleSessionRow struct {
	IDHash      string
	Subject     string
	TokenDigest string
	CreatedAt   time.Time
	ExpiresAt   time.Time
}
