package main

import (
	"go/version"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// buildBinary builds the binary as a release would (with extra build flags) into the test's
// temporary directory.
func buildBinary(t *testing.T, flags ...string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "commandbus")
	args := append([]string{"build", "-o", bin}, flags...)
	build := exec.Command("go", append(args, ".")...)
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	return bin
}

// TestReleaseBinary builds the binary once as a release would and checks it: the modules linked
// into it (go version -m) include no test double such as kfake, while a build with -tags kfake
// carries it (which shows the check looks at the right thing); and the process behaves under
// signals as Kubernetes sends them.
func TestReleaseBinary(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := buildBinary(t)
	t.Run("NoTestModules", func(t *testing.T) {
		t.Parallel()
		modules := func(bin string) string {
			out, err := exec.Command("go", "version", "-m", bin).CombinedOutput()
			require.NoError(t, err, "go version -m: %s", out)
			return string(out)
		}
		release := modules(bin)
		require.Contains(t, release, "github.com/jackc/pgx/v5", "go version -m lists the linked modules:\n%s", release)
		for _, testOnly := range []string{"github.com/twmb/franz-go/pkg/kfake", "github.com/stretchr/testify", "github.com/chromedp/chromedp"} {
			require.NotContains(t, release, testOnly, "the release binary links a test-only module")
		}
		tagged := modules(buildBinary(t, "-tags", "kfake"))
		require.True(t, strings.Contains(tagged, "github.com/twmb/franz-go/pkg/kfake"), "a -tags kfake build carries the in-process Kafka:\n%s", tagged)
	})
	t.Run("WorkerShutsDownOnSignals", func(t *testing.T) {
		t.Parallel()
		workerProcessShutsDownOnSignals(t, bin)
	})
}

// TestGoModDeclaresTheLowestGoVersion checks go.mod's go line: not a patch release (x.y.0), and
// no higher than the highest go line among the modules it requires, so importers are not made to
// upgrade for nothing. (The code itself compiles at the declared version: the compiler enforces
// the go line's language version and vet's stdversion check its standard library.)
func TestGoModDeclaresTheLowestGoVersion(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-m", "-f", "{{if .Main}}main {{end}}{{.GoVersion}}", "all").CombinedOutput()
	require.NoError(t, err, "go list -m: %s", out)
	var own, highest string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if v, ok := strings.CutPrefix(line, "main "); ok {
			own = v
			continue
		}
		if line != "" && version.Compare("go"+line, "go"+highest) > 0 {
			highest = line
		}
	}
	require.NotEmpty(t, own)
	require.Equal(t, version.Lang("go"+own)+".0", "go"+own, "go.mod's go line names a patch release")
	require.LessOrEqual(t, version.Compare("go"+own, "go"+highest), 0,
		"go.mod says go %s but no dependency needs more than go %s", own, highest)
}

// workerProcessShutsDownOnSignals runs the built binary as Kubernetes does: worker --metrics-addr
// serves the probes; SIGTERM fails /readyz at once and starts a graceful shutdown (here held by a
// long drain delay); a second signal (SIGINT) ends the process at once, with a non-zero status.
func workerProcessShutsDownOnSignals(t *testing.T, bin string) {
	db := sqliteURL(t, "signals.db")
	run(t, "migrate", "up", "--database", db)
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := listener.Addr().String()
	require.NoError(t, listener.Close())
	config := writeConfig(t, workerConfig+"  server:\n    drain-delay: 1m\n    shutdown-budget: 2m\n")

	var stderr lockedBuffer
	cmd := exec.Command(bin, "worker", "--config", config, "--database", db, "--metrics-addr", addr, "--log-level", "info")
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	var waitErr error
	exited := make(chan struct{})
	go func() {
		waitErr = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill() // an error when it has exited already
		<-exited
	})
	readyz := func() int {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	waitFor := func(want int, what string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for readyz() != want {
			select {
			case <-exited:
				t.Fatalf("the worker exited (%v) before %s:\n%s", waitErr, what, stderr.String())
			default:
			}
			require.True(t, time.Now().Before(deadline), "%s: /readyz never answered %d\n%s", what, want, stderr.String())
			time.Sleep(20 * time.Millisecond) // polling with a deadline
		}
	}
	waitFor(http.StatusOK, "ready")

	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	waitFor(http.StatusServiceUnavailable, "draining")

	started := time.Now()
	require.NoError(t, cmd.Process.Signal(os.Interrupt))
	select {
	case <-exited:
		var exit *exec.ExitError
		require.ErrorAs(t, waitErr, &exit, "a forced stop is a failure exit:\n%s", stderr.String())
		require.Less(t, time.Since(started), 20*time.Second)
		require.Contains(t, stderr.String(), "stopped at once on a second interrupt")
	case <-time.After(30 * time.Second):
		t.Fatalf("a second signal did not stop the worker:\n%s", stderr.String())
	}
}

// lockedBuffer is a buffer a process writes while the test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
