package imagebase_test

import (
	"archive/tar"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus/deploy/internal/imagebase"
)

func TestImage(t *testing.T) {
	t.Parallel()
	bundle := []byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
	img, err := imagebase.Image(bundle, "arm64")
	require.NoError(t, err)
	cfg, err := img.ConfigFile()
	require.NoError(t, err)
	require.Equal(t, "65532", cfg.Config.User)
	require.Equal(t, "linux", cfg.OS)
	require.Equal(t, "arm64", cfg.Architecture)

	files := map[string]string{}
	modes := map[string]int64{}
	tr := tar.NewReader(mutate.Extract(img))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		data, err := io.ReadAll(tr)
		require.NoError(t, err)
		name := strings.TrimSuffix(strings.TrimPrefix(h.Name, "/"), "/")
		files[name] = string(data)
		modes[name] = h.Mode
	}
	require.Equal(t, string(bundle), files["etc/ssl/certs/ca-certificates.crt"])
	require.Contains(t, files["etc/passwd"], "nonroot:x:65532:65532:")
	require.Equal(t, int64(0o1777), modes["tmp"])

	again, err := imagebase.Image(bundle, "arm64")
	require.NoError(t, err)
	d1, err := img.Digest()
	require.NoError(t, err)
	d2, err := again.Digest()
	require.NoError(t, err)
	require.Equal(t, d1, d2, "the same inputs give the same image")

	_, err = imagebase.Image(nil, "amd64")
	require.Error(t, err)
	require.True(t, strings.Contains(err.Error(), "CA bundle"))
}
