package main

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus/config"
	"github.com/commandbus/commandbus/examples/payments/fxapi"
)

// freeAddr returns a localhost address nobody listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

// startSimulateFX runs `simulate fx` until the test ends and waits until it answers.
func startSimulateFX(t *testing.T, db string) string {
	t.Helper()
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	exited := make(chan result, 1)
	go func() { exited <- execute(ctx, "simulate", "fx", "--addr", addr, "--database", db) }()
	t.Cleanup(func() {
		cancel()
		res := <-exited
		require.NoError(t, res.err, res.stderr)
	})
	url := "http://" + addr
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get(url + "/v1/contracts/none")
		if err == nil {
			resp.Body.Close()
			return url
		}
		select {
		case res := <-exited:
			t.Fatalf("simulate fx exited: %v\n%s", res.err, res.stderr)
		default:
		}
		require.True(t, time.Now().Before(deadline), "simulate fx did not answer: %v", err)
		time.Sleep(20 * time.Millisecond)
	}
}

func bookContract(t *testing.T, url, key string) (int, fxapi.Contract) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"sellCurrency": "EUR", "buyCurrency": "USD", "sellAmount": "10.00", "valueDate": "2026-11-23"})
	req, err := http.NewRequest(http.MethodPost, url+"/v1/contracts", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set(fxapi.HeaderIdempotencyKey, key)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var c fxapi.Contract
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&c))
	return resp.StatusCode, c
}

// `simulate fx` serves the FX provider on its own, its contracts in the database: two of them
// are one provider (a key booked through one is known to the other).
func TestSimulateFXSharesContractsThroughTheDatabase(t *testing.T) {
	t.Parallel()
	db := sqliteURL(t, "fx.db")
	res := fail(t, "simulate", "fx", "--addr", freeAddr(t), "--database", db)
	require.ErrorContains(t, res.err, "commandbus migrate up", "an unmigrated database is refused")

	run(t, "migrate", "up", "--database", db)
	one, two := startSimulateFX(t, db), startSimulateFX(t, db)
	status, booked := bookContract(t, one, "k1")
	require.Equal(t, http.StatusCreated, status)
	status, again := bookContract(t, two, "k1")
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, booked.ID, again.ID)
}

// fx.url points every instance at one FX provider instead of its own.
func TestConfigFXURLReachesThePlatform(t *testing.T) {
	t.Parallel()
	db := sqliteURL(t, "s.db")
	run(t, "migrate", "up", "--database", db)
	cfg, err := config.Load(writeConfig(t, "fx:\n  url: http://127.0.0.1:1\n"))
	require.NoError(t, err)
	cfg.Database.URL = db
	var s *stack
	s, err = startStack(context.Background(), stackOptions{Config: cfg, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	defer s.Stop(context.Background())
	require.Equal(t, "http://127.0.0.1:1", s.platform.FXAPIURL())
	require.Nil(t, s.platform.FXAPI(), "no provider of its own")
}
