package dbtest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/commandbus/commandbus/driver/pgdriver"
	"github.com/commandbus/commandbus/migrate"
)

// PostgresBinDir is where PrivatePostgres looks for initdb and pg_ctl first, unless
// COMMANDBUS_TEST_POSTGRES_BIN names another directory; then in the newest
// /usr/lib/postgresql/*/bin.
const PostgresBinDir = "/usr/lib/postgresql/15/bin"

// postgresBin returns the directory of the PostgreSQL server programs.
func postgresBin() string {
	if env := os.Getenv("COMMANDBUS_TEST_POSTGRES_BIN"); env != "" {
		return env
	}
	if _, err := os.Stat(filepath.Join(PostgresBinDir, "pg_ctl")); err == nil {
		return PostgresBinDir
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	best, bestVersion := PostgresBinDir, -1
	for _, dir := range dirs {
		version, err := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
		if err == nil && version > bestVersion {
			best, bestVersion = dir, version
		}
	}
	return best
}

// Cluster is a private PostgreSQL server a test owns: its own data directory, port and socket
// directory, so the test can stop it the hard way and start it again without touching the
// server other tests share.
type Cluster struct {
	tb      testing.TB
	bin     string
	dir     string // data directory
	sockets string
	log     string
	port    int
	// asUser runs the server's programs as this user when the test runs as root (initdb refuses
	// root); empty otherwise.
	asUser string
}

// PrivatePostgres initialises and starts a private PostgreSQL cluster in a temporary directory
// (trust authentication, on a free localhost port, its socket in the same directory), stopped
// and removed when the test ends. When the test runs as root, the server runs as the postgres
// user. It skips the test when the binaries are missing, unless COMMANDBUS_REQUIRE_POSTGRES=1.
func PrivatePostgres(tb testing.TB) *Cluster {
	tb.Helper()
	bin := postgresBin()
	if _, err := os.Stat(filepath.Join(bin, "pg_ctl")); err != nil {
		if os.Getenv("COMMANDBUS_REQUIRE_POSTGRES") == "1" {
			tb.Fatalf("PostgreSQL binaries not found in %s (COMMANDBUS_TEST_POSTGRES_BIN): %v", bin, err)
		}
		tb.Skipf("PostgreSQL binaries not found in %s: set COMMANDBUS_TEST_POSTGRES_BIN to run this test against a private server", bin)
	}
	root, err := os.MkdirTemp("", "cbpg")
	if err != nil {
		tb.Fatal(err)
	}
	c := &Cluster{tb: tb, bin: bin, dir: filepath.Join(root, "data"), sockets: root, log: filepath.Join(root, "server.log")}
	tb.Cleanup(func() { _ = os.RemoveAll(root) })
	if os.Geteuid() == 0 {
		c.asUser = "postgres"
		u, err := user.Lookup(c.asUser)
		if err != nil {
			tb.Fatalf("running as root, the private PostgreSQL server needs the postgres user: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(root, uid, gid); err != nil {
			tb.Fatal(err)
		}
	}
	if c.port, err = freePort(); err != nil {
		tb.Fatal(err)
	}
	c.run("initdb", "-D", c.dir, "-U", "postgres", "-A", "trust", "--no-sync", "-E", "UTF8", "--locale=C")
	c.Start()
	tb.Cleanup(func() { c.stop("immediate", false) })
	return c
}

// URL is the cluster's connection string (database postgres, user postgres).
func (c *Cluster) URL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", c.port)
}

// Start starts the server and waits until it accepts connections (after crash recovery, when it
// was stopped the hard way).
func (c *Cluster) Start() {
	c.tb.Helper()
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=40", c.port, c.sockets)
	c.run("pg_ctl", "-D", c.dir, "-l", c.log, "-o", opts, "-w", "-t", "30", "start")
}

// Crash stops the server at once, as a crash does (pg_ctl stop -m immediate): connections drop,
// nothing is shut down cleanly, and the next start recovers from the WAL.
func (c *Cluster) Crash() {
	c.tb.Helper()
	c.stop("immediate", true)
}

func (c *Cluster) stop(mode string, must bool) {
	cmd := c.command("pg_ctl", "-D", c.dir, "-m", mode, "-w", "stop")
	if out, err := cmd.CombinedOutput(); err != nil && must {
		c.tb.Fatalf("pg_ctl stop: %v\n%s", err, out)
	}
}

// Driver returns a PostgreSQL driver on a fresh, migrated schema of the cluster, through a small
// pool that reconnects after the server comes back.
func (c *Cluster) Driver() *pgdriver.Driver {
	c.tb.Helper()
	cfg, err := pgxpool.ParseConfig(c.URL())
	if err != nil {
		c.tb.Fatal(err)
	}
	cfg.MaxConns = 8
	cfg.ConnConfig.ConnectTimeout = 2 * time.Second
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		c.tb.Fatal(err)
	}
	c.tb.Cleanup(pool.Close)
	drv, err := pgdriver.New(pool, &pgdriver.Config{Schema: "cbtest_" + randomHex(6)})
	if err != nil {
		c.tb.Fatal(err)
	}
	if _, err := migrate.New(drv, nil).Up(context.Background()); err != nil {
		c.tb.Fatalf("migrating the private cluster: %v", err)
	}
	return drv
}

func (c *Cluster) run(program string, args ...string) {
	c.tb.Helper()
	if out, err := c.command(program, args...).CombinedOutput(); err != nil {
		logTail := ""
		if data, rerr := os.ReadFile(c.log); rerr == nil {
			logTail = "\nserver log:\n" + string(data)
		}
		c.tb.Fatalf("%s %s: %v\n%s%s", program, strings.Join(args, " "), err, out, logTail)
	}
}

func (c *Cluster) command(program string, args ...string) *exec.Cmd {
	path := filepath.Join(c.bin, program)
	if c.asUser != "" {
		return exec.Command("runuser", append([]string{"-u", c.asUser, "--", path}, args...)...)
	}
	return exec.Command(path, args...)
}

// freePort returns a localhost TCP port nobody listens on now.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
