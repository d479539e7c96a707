package deploy_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/commandbus/commandbus/internal/dbtest"
)

// TestManifestsRunTheBinary runs the binary as the split overlay's pods would, against a real
// PostgreSQL on a fresh schema: the migration Job's command, then serve with its ConfigMap's
// configuration file, its environment and its Secret's tokens file, answering /readyz on its
// port and stopping within its terminationGracePeriodSeconds on SIGTERM; then each worker
// Deployment with its ConfigMap and COMMANDBUS_* environment, probed on its metrics port.
func TestManifestsRunTheBinary(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	schema := fmt.Sprintf("cbdeploy_%d", time.Now().UnixNano()%1_000_000_000)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
	})

	dir := t.TempDir()
	bin := commandbusBinary(t)

	var (
		job         batchv1.Job
		deployments = map[string]appsv1.Deployment{}
		files       = map[string]string{} // mounted file name → content
	)
	for _, r := range render(t, "split") {
		switch r.kind {
		case "Job":
			require.NoError(t, yaml.Unmarshal(r.yaml, &job))
		case "Deployment":
			var d appsv1.Deployment
			require.NoError(t, yaml.Unmarshal(r.yaml, &d))
			deployments[d.Name] = d
		case "ConfigMap":
			var cm corev1.ConfigMap
			require.NoError(t, yaml.Unmarshal(r.yaml, &cm))
			for k, v := range cm.Data {
				files[k] = v
			}
		case "Secret":
			var s corev1.Secret
			require.NoError(t, yaml.Unmarshal(r.yaml, &s))
			for k, v := range s.StringData {
				files[k] = v
			}
		}
	}
	for name, content := range files {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600))
	}
	// mounted maps a path in one of the container's mounted ConfigMaps or Secrets (a tokens file
	// named by the environment) to the file written for it in dir.
	mounted := func(c corev1.Container, value string) string {
		for _, m := range c.VolumeMounts {
			if m.MountPath != "/tmp" && strings.HasPrefix(value, m.MountPath+"/") {
				return filepath.Join(dir, strings.TrimPrefix(value, m.MountPath+"/"))
			}
		}
		return value
	}
	// environ is the container's environment as the kubelet would set it, with the database
	// Secret's URL pointing at the test server and the schema at this test's.
	environ := func(c corev1.Container) []string {
		env := []string{"PATH=" + os.Getenv("PATH"), "COMMANDBUS_DATABASE_SCHEMA=" + schema}
		for _, e := range c.Env {
			switch {
			case e.Name == "COMMANDBUS_DATABASE_SCHEMA":
			case e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil:
				require.Equal(t, "commandbus-database", e.ValueFrom.SecretKeyRef.Name)
				env = append(env, e.Name+"="+dbtest.DatabaseURL())
			case e.ValueFrom != nil && e.ValueFrom.ResourceFieldRef != nil:
				// limits.memory with the default divisor: bytes, which GOMEMLIMIT reads.
				require.Equal(t, "limits.memory", e.ValueFrom.ResourceFieldRef.Resource)
				env = append(env, fmt.Sprintf("%s=%d", e.Name, c.Resources.Limits.Memory().Value()))
			default:
				env = append(env, e.Name+"="+mounted(c, e.Value))
			}
		}
		return env
	}
	// args are the container's arguments with the mounted files and ports mapped to the test's.
	args := func(c corev1.Container, port string) []string {
		out := make([]string, len(c.Args))
		for i, a := range c.Args {
			switch {
			case strings.HasPrefix(a, "/etc/commandbus/"):
				out[i] = filepath.Join(dir, strings.TrimPrefix(a, "/etc/commandbus/"))
			case a == ":8080" || a == ":9090":
				out[i] = "127.0.0.1:" + port
			default:
				out[i] = a
			}
		}
		return out
	}

	// The migration Job.
	migrateContainer := job.Spec.Template.Spec.Containers[0]
	migrate := exec.CommandContext(t.Context(), bin, args(migrateContainer, "")...)
	migrate.Env = environ(migrateContainer)
	out, err := migrate.CombinedOutput()
	require.NoError(t, err, "the migration Job's command:\n%s", out)
	var tables int
	require.NoError(t, pool.QueryRow(t.Context(), `SELECT count(*) FROM information_schema.tables WHERE table_schema = $1`, schema).Scan(&tables))
	require.Positive(t, tables, "migrate up created no table in %s", schema)

	workerHelp, err := exec.CommandContext(t.Context(), bin, "worker", "--help").CombinedOutput()
	require.NoError(t, err)
	for _, name := range []string{"commandbus-serve", "ratelimited-worker", "payments-worker"} {
		t.Run(name, func(t *testing.T) {
			d, ok := deployments[name]
			require.True(t, ok)
			c := d.Spec.Template.Spec.Containers[0]
			port := freePort(t)
			cmdArgs := args(c, port)
			probed := true
			if c.Args[0] == "worker" && !strings.Contains(string(workerHelp), "--metrics-addr") {
				// Until worker serves its probes, run it without them and wait for it to run.
				t.Log("this build's worker has no --metrics-addr: its probes are not checked")
				i := slices.Index(cmdArgs, "--metrics-addr")
				require.GreaterOrEqual(t, i, 0)
				cmdArgs = slices.Delete(cmdArgs, i, i+2)
				probed = false
			}
			cmd := exec.Command(bin, cmdArgs...)
			cmd.Env = environ(c)
			logs := &syncBuffer{}
			cmd.Stdout, cmd.Stderr = logs, logs
			require.NoError(t, cmd.Start())
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			t.Cleanup(func() { _ = cmd.Process.Kill() })

			probe := c.ReadinessProbe.HTTPGet.Path
			require.Eventually(t, func() bool {
				select {
				case err := <-done:
					done <- err
					return true // exited: reported below
				default:
				}
				if !probed {
					return strings.Contains(logs.String(), "running; interrupt to stop")
				}
				resp, err := http.Get("http://127.0.0.1:" + port + probe)
				if err != nil {
					return false
				}
				resp.Body.Close()
				return resp.StatusCode == http.StatusOK
			}, 60*time.Second, 100*time.Millisecond, "%s never answered %s", name, probe)
			select {
			case err := <-done:
				t.Fatalf("%s exited: %v\n%s", name, err, logs.String())
			default:
			}
			if name == "commandbus-serve" {
				// The tokens of the Secret's file open the API; nothing else does.
				var tokens []struct {
					Token string `json:"token"`
				}
				require.NoError(t, yaml.Unmarshal([]byte(files["tokens.yml"]), &tokens))
				require.NotEmpty(t, tokens)
				for token, want := range map[string]int{tokens[0].Token: http.StatusOK, "not-a-token-of-the-secret": http.StatusUnauthorized} {
					req, err := http.NewRequest(http.MethodGet, "http://127.0.0.1:"+port+"/api/executions", nil)
					require.NoError(t, err)
					req.Header.Set("Authorization", "Bearer "+token)
					resp, err := http.DefaultClient.Do(req)
					require.NoError(t, err)
					resp.Body.Close()
					require.Equal(t, want, resp.StatusCode, "GET /api/executions with token %q", token)
				}
			}
			if probed {
				resp, err := http.Get("http://127.0.0.1:" + port + c.LivenessProbe.HTTPGet.Path)
				require.NoError(t, err)
				resp.Body.Close()
				require.Equal(t, http.StatusOK, resp.StatusCode)
			}

			// The kubelet's SIGTERM: a clean exit within the grace period.
			require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
			grace := time.Duration(*d.Spec.Template.Spec.TerminationGracePeriodSeconds) * time.Second
			select {
			case err := <-done:
				require.NoError(t, err, "%s after SIGTERM:\n%s", name, logs.String())
			case <-time.After(grace):
				t.Fatalf("%s still running %s after SIGTERM:\n%s", name, grace, logs.String())
			}
		})
	}
}

var (
	binaryOnce sync.Once
	binaryPath string
	binaryErr  error
)

// commandbusBinary builds ./cmd/commandbus once for the package's tests, with the repository's
// own go.mod, and returns its path.
func commandbusBinary(t *testing.T) string {
	t.Helper()
	binaryOnce.Do(func() {
		dir, err := os.MkdirTemp("", "commandbus-deploy-test-")
		if err != nil {
			binaryErr = err
			return
		}
		binaryPath = filepath.Join(dir, "commandbus")
		build := exec.Command("go", "build", "-o", binaryPath, "./cmd/commandbus")
		build.Dir = ".."
		if out, err := build.CombinedOutput(); err != nil {
			binaryErr = fmt.Errorf("go build ./cmd/commandbus: %w\n%s", err, out)
		}
	})
	require.NoError(t, binaryErr)
	return binaryPath
}

// freePort returns a TCP port free on 127.0.0.1 a moment ago.
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	_, port, err := net.SplitHostPort(l.Addr().String())
	require.NoError(t, err)
	return port
}

// syncBuffer collects a process's output while the test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
