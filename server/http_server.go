package server

import (
	"errors"
	"fmt"
	"net/http"
	"time"
)

// Timeouts bound how long the HTTP server waits on a client, so slow or idle connections cannot
// hold the server's resources. A zero field takes its default.
type Timeouts struct {
	// ReadHeader bounds reading a request's headers. Default: 10s.
	ReadHeader time.Duration
	// Read bounds reading a whole request, body included. Default: 30s.
	Read time.Duration
	// Write bounds handling a request and writing its answer, counted from the end of its
	// headers; submitting a payment runs its process in the request. Default: 60s.
	Write time.Duration
	// Idle bounds how long a keep-alive connection waits for its next request. Default: 120s.
	Idle time.Duration
}

// The timeouts' defaults.
const (
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultReadTimeout       = 30 * time.Second
	DefaultWriteTimeout      = 60 * time.Second
	DefaultIdleTimeout       = 120 * time.Second
)

// WithDefaults returns t with each zero field set to its default.
func (t Timeouts) WithDefaults() Timeouts {
	defaults := func(d *time.Duration, def time.Duration) {
		if *d == 0 {
			*d = def
		}
	}
	defaults(&t.ReadHeader, DefaultReadHeaderTimeout)
	defaults(&t.Read, DefaultReadTimeout)
	defaults(&t.Write, DefaultWriteTimeout)
	defaults(&t.Idle, DefaultIdleTimeout)
	return t
}

// Validate reports every negative timeout, naming it, and a read-header timeout longer than the
// read timeout (the read timeout would cut it short).
func (t Timeouts) Validate() error {
	var errs []error
	for _, f := range []struct {
		name string
		d    time.Duration
	}{{"read-header-timeout", t.ReadHeader}, {"read-timeout", t.Read}, {"write-timeout", t.Write}, {"idle-timeout", t.Idle}} {
		if f.d < 0 {
			errs = append(errs, fmt.Errorf("server.%s: must not be negative, got %s", f.name, f.d))
		}
	}
	if t.ReadHeader > 0 && t.Read > 0 && t.ReadHeader > t.Read {
		errs = append(errs, fmt.Errorf("server.read-header-timeout (%s) must not exceed server.read-timeout (%s)", t.ReadHeader, t.Read))
	}
	return errors.Join(errs...)
}

// NewHTTPServer returns an http.Server for handler on addr with the timeouts (defaults for the
// zero ones).
func NewHTTPServer(addr string, handler http.Handler, t Timeouts) *http.Server {
	t = t.WithDefaults()
	return &http.Server{Addr: addr, Handler: handler, ReadHeaderTimeout: t.ReadHeader, ReadTimeout: t.Read,
		WriteTimeout: t.Write, IdleTimeout: t.Idle}
}
