package deploy_test

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus/internal/dbtest"
)

// TestPgBouncerTransactionPooling checks what the README says of PgBouncer in transaction mode:
// pgx's cached prepared statements fail through it (PgBouncer before 1.21, or without
// max_prepared_statements), and default_query_exec_mode=exec in the URL makes commandbus work
// through it. It runs `bench bus` through a PgBouncer started for the test. Skipped without
// pgbouncer on PATH (Debian package pgbouncer), unless COMMANDBUS_REQUIRE_PGBOUNCER=1.
func TestPgBouncerTransactionPooling(t *testing.T) {
	t.Parallel()
	pgbouncer, err := exec.LookPath("pgbouncer")
	if err != nil {
		if os.Getenv("COMMANDBUS_REQUIRE_PGBOUNCER") == "1" {
			t.Fatal("pgbouncer is required (COMMANDBUS_REQUIRE_PGBOUNCER=1) but not on PATH: apt-get install pgbouncer")
		}
		t.Skip("pgbouncer not on PATH (apt-get install pgbouncer)")
	}
	dbtest.Pool(t) // skips, or fails under COMMANDBUS_REQUIRE_POSTGRES=1, without PostgreSQL
	server, err := url.Parse(dbtest.DatabaseURL())
	require.NoError(t, err)
	bin := commandbusBinary(t)

	// PgBouncer refuses to run as root; as root, it drops to nobody, who must write its files.
	dir, err := os.MkdirTemp("", "commandbus-pgbouncer-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o777))
	port := freePort(t)
	user := server.User.Username()
	password, _ := server.User.Password()
	database := strings.TrimPrefix(server.Path, "/")
	ini := fmt.Sprintf(`[databases]
%[1]s = host=%[2]s port=%[3]s dbname=%[1]s
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %[4]s
unix_socket_dir =
auth_type = trust
auth_file = %[5]s/users.txt
pool_mode = transaction
default_pool_size = 5
max_client_conn = 200
logfile = %[5]s/pgbouncer.log
ignore_startup_parameters = extra_float_digits
`, database, server.Hostname(), server.Port(), port, dir)
	if password != "" {
		ini = strings.Replace(ini, "dbname=", "password="+password+" dbname=", 1)
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "pgbouncer.ini"), []byte(ini), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "users.txt"), []byte(fmt.Sprintf("%q \"\"\n", user)), 0o644))
	args := []string{filepath.Join(dir, "pgbouncer.ini")}
	if os.Geteuid() == 0 {
		args = append([]string{"-u", "nobody"}, args...)
	}
	cmd := exec.Command(pgbouncer, args...)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })

	bouncerURL := fmt.Sprintf("postgres://%s@127.0.0.1:%s/%s?sslmode=disable", user, port, database)
	bench := func(rawURL string) (string, error) {
		run := exec.CommandContext(t.Context(), bin, "bench", "bus", "--database", rawURL, "--commands", "500", "--send-batch", "100")
		out, err := run.CombinedOutput()
		return string(out), err
	}
	require.Eventually(t, func() bool {
		conn, err := net.DialTimeout("tcp", "127.0.0.1:"+port, time.Second)
		if err == nil {
			conn.Close()
		}
		return err == nil
	}, 20*time.Second, 50*time.Millisecond, "PgBouncer never listened")

	// pgx's cached prepared statements break through transaction pooling: statements fail with
	// "prepared statement ... does not exist" (or "already exists"). Whether the run then fails
	// depends on which statements hit it (the pollers retry theirs), so the errors are what is
	// asserted, not the exit status.
	out, _ := bench(bouncerURL)
	require.Contains(t, out, "prepared statement", "pgx's cached prepared statements passed through transaction pooling:\n%s", out)

	out, err = bench(bouncerURL + "&default_query_exec_mode=exec")
	require.NoError(t, err, "default_query_exec_mode=exec through PgBouncer:\n%s", out)
	require.Contains(t, out, "500 in")
	t.Logf("bench bus through PgBouncer (transaction pooling, exec mode):\n%s", out)
}
