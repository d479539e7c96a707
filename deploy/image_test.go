package deploy_test

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/buildinfo"
	"errors"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus/deploy/internal/imagebase"
)

// koPath finds ko: $COMMANDBUS_KO, else ko on PATH. Without it the image test is skipped,
// unless COMMANDBUS_REQUIRE_KO=1 (as .ci/run sets, after `go install github.com/google/ko@v0.19.1`).
func koPath(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("COMMANDBUS_KO"); p != "" {
		return p
	}
	p, err := exec.LookPath("ko")
	if err == nil {
		return p
	}
	if os.Getenv("COMMANDBUS_REQUIRE_KO") == "1" {
		t.Fatalf("ko is required (COMMANDBUS_REQUIRE_KO=1) but not on PATH: go install github.com/google/ko@v0.19.1")
	}
	t.Skip("ko not found: go install github.com/google/ko@v0.19.1, or set COMMANDBUS_KO")
	return ""
}

// TestImageBuildsWithKo builds the image as a release does, `ko build` with the repository's
// .ko.yaml, to a tarball, from a base served by an in-process registry (nothing is pulled), then
// checks the image: numeric non-root user, ko's entrypoint, the CA bundle, a writable /tmp, and a
// static binary that runs under an arbitrary UID with group 0, as OpenShift starts it.
func TestImageBuildsWithKo(t *testing.T) {
	t.Parallel()
	ko := koPath(t)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()

	caBundle, err := os.ReadFile("/etc/ssl/certs/ca-certificates.crt")
	require.NoError(t, err, "the host's CA bundle (Debian package ca-certificates)")
	base, err := imagebase.Image(caBundle, runtime.GOARCH)
	require.NoError(t, err)
	reg := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(reg.Close)
	host := strings.TrimPrefix(reg.URL, "http://")
	baseRef, err := name.ParseReference(host + "/commandbus-base:test") // 127.0.0.1: plain HTTP
	require.NoError(t, err)
	require.NoError(t, remote.Write(baseRef, base, remote.WithContext(ctx)))

	dir := t.TempDir()
	tarPath := filepath.Join(dir, "commandbus.tar")
	cmd := exec.CommandContext(ctx, ko, "build", "./cmd/commandbus", "--bare", "--push=false",
		"--tarball", tarPath, "--platform", "linux/"+runtime.GOARCH, "--sbom", "none")
	cmd.Dir = ".." // the repository's root: its go.mod and .ko.yaml
	cmd.Env = append(os.Environ(),
		"KO_DOCKER_REPO=registry.example.com/payments/commandbus",
		"KO_DEFAULTBASEIMAGE="+baseRef.String(),
		"KOCACHE="+filepath.Join(dir, "kocache"),
	)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "ko build:\n%s", out)

	tag, err := name.NewTag("registry.example.com/payments/commandbus:latest")
	require.NoError(t, err)
	img, err := tarball.ImageFromPath(tarPath, &tag)
	require.NoError(t, err)
	cfg, err := img.ConfigFile()
	require.NoError(t, err)
	require.Equal(t, "65532", cfg.Config.User, "a numeric user, so runAsNonRoot can check it")
	require.Equal(t, []string{"/ko-app/commandbus"}, cfg.Config.Entrypoint)
	require.Equal(t, "linux", cfg.OS)
	require.Equal(t, runtime.GOARCH, cfg.Architecture)

	// The image's files, flattened.
	files := map[string]*tar.Header{}
	var binary []byte
	tr := tar.NewReader(mutate.Extract(img))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		files[strings.TrimPrefix(h.Name, "/")] = h
		if strings.TrimPrefix(h.Name, "/") == "ko-app/commandbus" {
			binary, err = io.ReadAll(tr)
			require.NoError(t, err)
		}
	}
	require.Contains(t, files, "etc/ssl/certs/ca-certificates.crt")
	require.Contains(t, files, "etc/passwd")
	require.Contains(t, files, "tmp")
	require.Equal(t, int64(0o1777), files["tmp"].Mode&0o7777, "/tmp is world-writable with the sticky bit")
	require.NotEmpty(t, binary, "/ko-app/commandbus")
	require.Equal(t, int64(0o555), files["ko-app/commandbus"].Mode&0o555, "the binary is readable and executable by any user")

	require.NotContains(t, files, "bin/sh", "no shell in the image")

	// Built as .ko.yaml says: static, reproducible paths, time zones compiled in.
	info, err := buildinfo.Read(bytes.NewReader(binary))
	require.NoError(t, err)
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	require.Equal(t, "0", settings["CGO_ENABLED"])
	require.Equal(t, "true", settings["-trimpath"])
	require.Equal(t, "timetzdata", settings["-tags"])
	require.Equal(t, "github.com/commandbus/commandbus/cmd/commandbus", info.Path)

	// The binary is static and runs as a UID from an OpenShift namespace's range, group 0.
	// t.TempDir's parent is private to this user; the arbitrary UID needs a directory it can enter.
	exeDir, err := os.MkdirTemp("", "commandbus-image-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(exeDir) })
	require.NoError(t, os.Chmod(exeDir, 0o755))
	exe := filepath.Join(exeDir, "commandbus")
	require.NoError(t, os.WriteFile(exe, binary, 0o555))
	run := exec.CommandContext(ctx, exe, "--version")
	run.Env = []string{"HOME=/tmp", "TMPDIR=/tmp"}
	if os.Geteuid() == 0 {
		run.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 1000650000, Gid: 0}}
	}
	version, err := run.CombinedOutput()
	require.NoError(t, err, "%s", version)
	require.Contains(t, string(version), "commandbus")
	t.Logf("the image's binary, as UID 1000650000: %s", strings.TrimSpace(string(version)))
}
