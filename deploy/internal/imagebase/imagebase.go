// Package imagebase builds the smallest base image the commandbus binary needs, from nothing
// (scratch), for registries that cannot pull one: the binary is static (pure Go, modernc SQLite,
// time zones compiled in with -tags timetzdata), so the base holds only what the kernel and Go's
// libraries look for on disk:
//
//   - /etc/ssl/certs/ca-certificates.crt, the CA bundle TLS to PostgreSQL, brokers and external
//     APIs verifies against (a scratch image has none, and every TLS handshake would fail);
//   - /etc/passwd and /etc/group naming root and nonroot (65532), so that the user resolves;
//   - /tmp, world-writable with the sticky bit, for when no emptyDir is mounted there;
//   - a configuration whose User is the numeric 65532, so Kubernetes' runAsNonRoot can check it
//     without reading /etc/passwd, and OpenShift may replace it with any UID (group 0).
//
// The production default in .ko.yaml is gcr.io/distroless/static-debian12:nonroot, which holds
// the same things; this package is what CI builds with, offline.
package imagebase

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// NonRootUID is the user the image runs as: the distroless "nonroot" user's id.
const NonRootUID = 65532

// epoch is every file's modification time, so the same inputs give the same image digest.
var epoch = time.Unix(0, 0).UTC()

// Image returns the base image for architecture arch (amd64, arm64) with caBundle, a PEM file of
// trusted CA certificates, at /etc/ssl/certs/ca-certificates.crt.
func Image(caBundle []byte, arch string) (v1.Image, error) {
	if len(caBundle) == 0 {
		return nil, fmt.Errorf("imagebase: the CA bundle is empty: TLS would trust no server")
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs := []struct {
		name string
		mode int64
		uid  int
	}{
		{"etc/", 0o755, 0}, {"etc/ssl/", 0o755, 0}, {"etc/ssl/certs/", 0o755, 0},
		{"home/", 0o755, 0}, {"home/nonroot/", 0o770, NonRootUID}, {"tmp/", 0o1777, 0},
	}
	for _, d := range dirs {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d.name, Mode: d.mode, Uid: d.uid, ModTime: epoch}); err != nil {
			return nil, err
		}
	}
	files := []struct {
		name string
		data []byte
	}{
		{"etc/passwd", []byte(fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", NonRootUID, NonRootUID))},
		{"etc/group", []byte(fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", NonRootUID))},
		{"etc/ssl/certs/ca-certificates.crt", caBundle},
	}
	for _, f := range files {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: f.name, Mode: 0o644, Size: int64(len(f.data)), ModTime: epoch}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	layerBytes := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerBytes)), nil
	})
	if err != nil {
		return nil, err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS = "linux"
	cfg.Architecture = arch
	cfg.Created = v1.Time{Time: epoch}
	cfg.Config.User = fmt.Sprint(NonRootUID)
	cfg.Config.WorkingDir = "/"
	cfg.Config.Env = []string{
		"PATH=/usr/local/bin:/usr/bin:/bin",
		"SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt",
	}
	return mutate.ConfigFile(img, cfg)
}
