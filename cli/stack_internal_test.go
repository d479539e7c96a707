package cli

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/config"
	"github.com/commandbus/commandbus/server"
)

// The served HTTP server has the configuration's timeouts, and the defaults for those it leaves out.
func TestStackServesWithTheConfiguredTimeouts(t *testing.T) {
	t.Parallel()
	file := &config.File{}
	file.Database.URL = "sqlite://" + filepath.Join(t.TempDir(), "timeouts.db")
	file.Server.Tokens = []config.TokenConfig{{Subject: "ops", Token: "operator-token-0123456789", Role: "operator"}}
	file.Server.WriteTimeout = commandbus.Duration(3 * time.Minute)
	file.Server.IdleTimeout = commandbus.Duration(10 * time.Second)
	s, err := StartStack(context.Background(), Config{}, StackOptions{File: file.WithDefaults(), Migrate: true, ServeAddr: "127.0.0.1:0"})
	require.NoError(t, err)
	t.Cleanup(func() { s.Stop(context.Background()) })
	require.Equal(t, 3*time.Minute, s.http.WriteTimeout)
	require.Equal(t, 10*time.Second, s.http.IdleTimeout)
	require.Equal(t, server.DefaultReadTimeout, s.http.ReadTimeout)
	require.Equal(t, server.DefaultReadHeaderTimeout, s.http.ReadHeaderTimeout)
}
