package server_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	. "github.com/commandbus/commandbus/server"
)

// The HTTP server gets every timeout, not only ReadHeaderTimeout: defaults for the ones not given.
func TestNewHTTPServerSetsEveryTimeout(t *testing.T) {
	t.Parallel()
	hs := NewHTTPServer("127.0.0.1:0", http.NotFoundHandler(), Timeouts{Write: 5 * time.Minute})
	require.Equal(t, DefaultReadHeaderTimeout, hs.ReadHeaderTimeout)
	require.Equal(t, DefaultReadTimeout, hs.ReadTimeout)
	require.Equal(t, 5*time.Minute, hs.WriteTimeout)
	require.Equal(t, DefaultIdleTimeout, hs.IdleTimeout)
	require.Equal(t, "127.0.0.1:0", hs.Addr)

	require.NoError(t, Timeouts{}.Validate())
	err := Timeouts{Read: -time.Second, ReadHeader: time.Minute, Idle: -1}.Validate()
	require.ErrorContains(t, err, "server.read-timeout: must not be negative")
	require.ErrorContains(t, err, "server.idle-timeout: must not be negative")
	require.ErrorContains(t, Timeouts{ReadHeader: time.Minute, Read: time.Second}.Validate(), "must not exceed server.read-timeout")
}
