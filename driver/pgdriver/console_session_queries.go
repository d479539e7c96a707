package pgdriver

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/commandbus/commandbus/driver"
)

func (e *executor) ConsoleSessionInsert(ctx context.Context, params *driver.ConsoleSessionInsertParams) error {
	_, err := e.db.Exec(ctx, e.d.sql(`INSERT INTO {schema}.console_session (id_hash, subject, token_digest, created_at, expires_at)
		VALUES ($1, $2, $3, $4, $5)`), params.IDHash, params.Subject, params.TokenDigest, params.CreatedAt, params.ExpiresAt)
	return err
}

func (e *executor) ConsoleSessionGet(ctx context.Context, params *driver.ConsoleSessionGetParams) (*driver.ConsoleSessionRow, error) {
	r := &driver.ConsoleSessionRow{}
	err := e.db.QueryRow(ctx, e.d.sql(`SELECT id_hash, subject, token_digest, created_at, expires_at FROM {schema}.console_session
		WHERE id_hash = $1 AND expires_at > $2`), params.IDHash, params.Now).
		Scan(&r.IDHash, &r.Subject, &r.TokenDigest, &r.CreatedAt, &r.ExpiresAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, driver.ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	return r, nil
}

func (e *executor) ConsoleSessionDelete(ctx context.Context, idHash string) (bool, error) {
	tag, err := e.db.Exec(ctx, e.d.sql(`DELETE FROM {schema}.console_session WHERE id_hash = $1`), idHash)
	if err != nil {
		return false, err
	}
	return tag.RowsAffected() == 1, nil
}

func (e *executor) ConsoleSessionDeleteExpired(ctx context.Context, now time.Time) (int64, error) {
	tag, err := e.db.Exec(ctx, e.d.sql(`DELETE FROM {schema}.console_session WHERE expires_at <= $1`), now)
	if err != nil {
		return 0, err
	}
	return tag.RowsAffected(), nil
}
