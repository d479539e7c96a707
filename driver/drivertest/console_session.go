package drivertest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus/driver"
)

func exerciseConsoleSessions(t *testing.T, setup setupFunc) {
	ctx := context.Background()
	t.Run("LiveUntilExpiryOrDelete", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		insert := func(id string, expires time.Time) {
			t.Helper()
			require.NoError(t, b.exec.ConsoleSessionInsert(ctx, &driver.ConsoleSessionInsertParams{IDHash: id, Subject: "alice",
				TokenDigest: "d1", CreatedAt: t0, ExpiresAt: expires}))
		}
		insert("s1", t0.Add(time.Hour))
		insert("s2", t0.Add(time.Minute))
		require.Error(t, b.exec.ConsoleSessionInsert(ctx, &driver.ConsoleSessionInsertParams{IDHash: "s1", Subject: "bob", TokenDigest: "d2",
			CreatedAt: t0, ExpiresAt: t0.Add(time.Hour)}), "an id is never reused")

		row, err := b.exec.ConsoleSessionGet(ctx, &driver.ConsoleSessionGetParams{IDHash: "s1", Now: t0.Add(time.Minute)})
		require.NoError(t, err)
		require.Equal(t, "alice", row.Subject)
		require.Equal(t, "d1", row.TokenDigest)
		requireTime(t, t0, row.CreatedAt, "created_at")
		requireTime(t, t0.Add(time.Hour), row.ExpiresAt, "expires_at")

		_, err = b.exec.ConsoleSessionGet(ctx, &driver.ConsoleSessionGetParams{IDHash: "s2", Now: t0.Add(time.Minute)})
		require.ErrorIs(t, err, driver.ErrNotFound, "expired at its expiry")
		_, err = b.exec.ConsoleSessionGet(ctx, &driver.ConsoleSessionGetParams{IDHash: "nope", Now: t0})
		require.ErrorIs(t, err, driver.ErrNotFound)

		n, err := b.exec.ConsoleSessionDeleteExpired(ctx, t0.Add(2*time.Minute))
		require.NoError(t, err)
		require.EqualValues(t, 1, n, "s2 only")

		deleted, err := b.exec.ConsoleSessionDelete(ctx, "s1")
		require.NoError(t, err)
		require.True(t, deleted)
		deleted, err = b.exec.ConsoleSessionDelete(ctx, "s1")
		require.NoError(t, err)
		require.False(t, deleted, "a second sign-out finds nothing")
		_, err = b.exec.ConsoleSessionGet(ctx, &driver.ConsoleSessionGetParams{IDHash: "s1", Now: t0})
		require.ErrorIs(t, err, driver.ErrNotFound, "signed out")
	})
}
