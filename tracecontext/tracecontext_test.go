package tracecontext_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus/tracecontext"
)

func TestTraceparent(t *testing.T) {
	t.Parallel()
	const header = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	sc, err := tracecontext.ParseTraceparent(header)
	require.NoError(t, err)
	require.Equal(t, "4bf92f3577b34da6a3ce929d0e0e4736", sc.TraceID.String())
	require.Equal(t, "00f067aa0ba902b7", sc.SpanID.String())
	require.True(t, sc.Sampled)
	require.Equal(t, header, sc.Traceparent())

	future, err := tracecontext.ParseTraceparent("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00-extra")
	require.NoError(t, err, "a later version is read by its version-00 fields")
	require.False(t, future.Sampled)

	for _, bad := range []string{
		"", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7", // too short
		"00-00000000000000000000000000000000-00f067aa0ba902b7-01",   // zero trace id
		"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",   // zero span id
		"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",   // upper case
		"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",   // forbidden version
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x", // version 00 has four fields
	} {
		_, err := tracecontext.ParseTraceparent(bad)
		require.ErrorIs(t, err, tracecontext.ErrInvalid, bad)
	}

	ctx := tracecontext.ContextWith(context.Background(), sc)
	got, ok := tracecontext.FromContext(ctx)
	require.True(t, ok)
	require.Equal(t, sc, got)
	_, ok = tracecontext.FromContext(context.Background())
	require.False(t, ok)
	got, ok = tracecontext.FromHeaders(map[string]string{tracecontext.Header: header})
	require.True(t, ok)
	require.Equal(t, sc, got)
}
