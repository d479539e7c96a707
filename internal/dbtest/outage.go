package dbtest

import (
	"context"
	"io"
	"net"
	"net/url"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/commandbus/commandbus/driver/pgdriver"
	"github.com/commandbus/commandbus/migrate"
)

// Outage stands between a driver and PostgreSQL as a TCP proxy, so a test can take the database
// away and give it back as an outage does: Begin cuts every open connection and refuses new
// ones; End accepts connections again. Other tests, which share the server, are not affected.
type Outage struct {
	listener net.Listener
	target   string

	mu    sync.Mutex
	down  bool
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// PostgresWithOutage returns a PostgreSQL driver on a fresh, migrated schema (dropped when the
// test ends) whose pool connects through an Outage, and the Outage.
func PostgresWithOutage(tb testing.TB) (*pgdriver.Driver, *Outage) {
	tb.Helper()
	shared := Pool(tb)
	cfg, err := pgxpool.ParseConfig(DatabaseURL())
	if err != nil {
		tb.Fatal(err)
	}
	o := &Outage{target: net.JoinHostPort(cfg.ConnConfig.Host, portString(cfg.ConnConfig.Port)), conns: map[net.Conn]struct{}{}}
	if o.listener, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		tb.Fatal(err)
	}
	o.wg.Add(1)
	go o.accept()
	tb.Cleanup(o.close)

	u, err := url.Parse(DatabaseURL())
	if err != nil {
		tb.Fatal(err)
	}
	u.Host = o.listener.Addr().String()
	proxied, err := pgxpool.ParseConfig(u.String())
	if err != nil {
		tb.Fatal(err)
	}
	proxied.MaxConns = 8
	proxied.ConnConfig.ConnectTimeout = 2 * time.Second
	pool, err := pgxpool.NewWithConfig(context.Background(), proxied)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(pool.Close)

	schema := "cbtest_" + randomHex(6)
	drv, err := pgdriver.New(pool, &pgdriver.Config{Schema: schema})
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := migrate.New(drv, nil).Up(context.Background()); err != nil {
		tb.Fatalf("migrating schema %s: %v", schema, err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := shared.Exec(ctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE"); err != nil {
			tb.Logf("dropping test schema %s: %v", schema, err)
		}
	})
	return drv, o
}

// Begin starts the outage: open connections are cut and new ones refused until End.
func (o *Outage) Begin() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.down = true
	for c := range o.conns {
		_ = c.Close()
	}
}

// End ends the outage: connections are accepted again.
func (o *Outage) End() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.down = false
}

func (o *Outage) accept() {
	defer o.wg.Done()
	for {
		client, err := o.listener.Accept()
		if err != nil {
			return
		}
		o.mu.Lock()
		down := o.down
		o.mu.Unlock()
		if down {
			_ = client.Close()
			continue
		}
		server, err := net.DialTimeout("tcp", o.target, 2*time.Second)
		if err != nil {
			_ = client.Close()
			continue
		}
		o.mu.Lock()
		o.conns[client], o.conns[server] = struct{}{}, struct{}{}
		o.mu.Unlock()
		o.wg.Add(2)
		go o.pipe(client, server)
		go o.pipe(server, client)
	}
}

// pipe copies from src to dst; when either side ends, both are closed.
func (o *Outage) pipe(dst, src net.Conn) {
	defer o.wg.Done()
	_, _ = io.Copy(dst, src)
	_ = dst.Close()
	_ = src.Close()
	o.mu.Lock()
	delete(o.conns, dst)
	delete(o.conns, src)
	o.mu.Unlock()
}

func (o *Outage) close() {
	_ = o.listener.Close()
	o.Begin()
	o.wg.Wait()
}

func portString(p uint16) string {
	if p == 0 {
		p = 5432
	}
	return strconv.Itoa(int(p))
}
