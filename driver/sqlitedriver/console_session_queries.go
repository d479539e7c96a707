package sqlitedriver

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/commandbus/commandbus/driver"
)

func (e *executor) ConsoleSessionInsert(ctx context.Context, params *driver.ConsoleSessionInsertParams) error {
	_, err := e.write.ExecContext(ctx, e.d.sql(`INSERT INTO {schema}.console_session (id_hash, subject, token_digest, created_at, expires_at)
		VALUES (?, ?, ?, ?, ?)`), params.IDHash, params.Subject, params.TokenDigest, micros(params.CreatedAt), micros(params.ExpiresAt))
	return err
}

func (e *executor) ConsoleSessionGet(ctx context.Context, params *driver.ConsoleSessionGetParams) (*driver.ConsoleSessionRow, error) {
	r := &driver.ConsoleSessionRow{}
	var created, expires int64
	err := e.read.QueryRowContext(ctx, e.d.sql(`SELECT id_hash, subject, token_digest, created_at, expires_at FROM {schema}.console_session
		WHERE id_hash = ? AND expires_at > ?`), params.IDHash, micros(params.Now)).
		Scan(&r.IDHash, &r.Subject, &r.TokenDigest, &created, &expires)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, driver.ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	r.CreatedAt, r.ExpiresAt = fromMicros(created), fromMicros(expires)
	return r, nil
}

func (e *executor) ConsoleSessionDelete(ctx context.Context, idHash string) (bool, error) {
	res, err := e.write.ExecContext(ctx, e.d.sql(`DELETE FROM {schema}.console_session WHERE id_hash = ?`), idHash)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

func (e *executor) ConsoleSessionDeleteExpired(ctx context.Context, now time.Time) (int64, error) {
	res, err := e.write.ExecContext(ctx, e.d.sql(`DELETE FROM {schema}.console_session WHERE expires_at <= ?`), micros(now))
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}
