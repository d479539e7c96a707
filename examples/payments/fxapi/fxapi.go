// Package fxapi is the simulated external FX provider of the reference payments platform: a REST
// API on a real localhost port that books, cancels and voids FX contracts. It honours the
// Idempotency-Key header (the same key returns the same contract, a key reused with a different
// request is rejected), and misbehaves as the X-Simulate header asks: permanent errors (400),
// business rejections (409), unavailability (503), hangs (timeouts) and latency.
//
// It stands for a third party: the platform reaches it only over HTTP, through the fx bounded
// context's anti-corruption layer.
package fxapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"
)

// HeaderIdempotencyKey carries the client's idempotency key.
const HeaderIdempotencyKey = "Idempotency-Key"

// HeaderSimulate carries a JSON Simulate: how this request should behave.
const HeaderSimulate = "X-Simulate"

// Simulate tells the simulated provider how to behave for one request: percentages applied in
// order (permanent, transient, business, timeout), and a latency range.
type Simulate struct {
	FailPermanentPct    float64 `json:"failPermanentPct,omitempty"`
	FailTransientPct    float64 `json:"failTransientPct,omitempty"`
	FailBusinessRulePct float64 `json:"failBusinessRulePct,omitempty"`
	TimeoutPct          float64 `json:"timeoutPct,omitempty"`
	MinDurationMs       int     `json:"minDurationMs,omitempty"`
	MaxDurationMs       int     `json:"maxDurationMs,omitempty"`
	Seed                uint64  `json:"seed,omitempty"`
}

// ContractRequest books a contract: sell SellAmount of SellCurrency for BuyCurrency.
type ContractRequest struct {
	SellCurrency string          `json:"sellCurrency"`
	BuyCurrency  string          `json:"buyCurrency"`
	SellAmount   decimal.Decimal `json:"sellAmount"`
	ValueDate    string          `json:"valueDate"`
	Reference    string          `json:"reference,omitempty"`
}

// Contract is a booked FX contract.
type Contract struct {
	ID           string          `json:"id"`
	SellCurrency string          `json:"sellCurrency"`
	BuyCurrency  string          `json:"buyCurrency"`
	SellAmount   decimal.Decimal `json:"sellAmount"`
	BuyAmount    decimal.Decimal `json:"buyAmount"`
	Rate         decimal.Decimal `json:"rate"`
	ValueDate    string          `json:"valueDate"`
	Status       string          `json:"status"`
	Reference    string          `json:"reference,omitempty"`
}

// Error is the provider's error body.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// usdPer are the provider's mid rates (US dollars per unit) and minor units per currency.
var usdPer = map[string]decimal.Decimal{
	"USD": decimal.NewFromInt(1), "EUR": decimal.RequireFromString("1.0850"), "GBP": decimal.RequireFromString("1.2700"),
	"CHF": decimal.RequireFromString("1.1300"), "JPY": decimal.RequireFromString("0.006700"),
}

var minorUnits = map[string]int32{"USD": 2, "EUR": 2, "GBP": 2, "CHF": 2, "JPY": 0}

// Store keeps the provider's contracts. The default keeps them in memory, in one process; a
// store in a database (the payments platform's) makes every replica's endpoint one provider, as a
// real FX provider is one external service.
type Store interface {
	// ByKey returns the contract booked under an idempotency key, or nil.
	ByKey(ctx context.Context, key string) (*Contract, error)
	// Insert books c under key unless the key has a contract already; it returns the key's
	// contract (c or the earlier one) and whether it was c.
	Insert(ctx context.Context, key string, c *Contract) (*Contract, bool, error)
	// Get returns a contract by id, or nil.
	Get(ctx context.Context, id string) (*Contract, error)
	// Cancel marks a contract CANCELLED and returns it, or nil when there is none.
	Cancel(ctx context.Context, id string) (*Contract, error)
	// Void closes an idempotency key: the contract booked under it is CANCELLED, and a key with
	// no contract yet gets a VOIDED placeholder, so that Insert under it (a booking still in
	// flight) returns the placeholder instead of booking. It returns the key's contract or
	// placeholder.
	Void(ctx context.Context, key, reference string) (*Contract, error)
}

// The statuses of a contract: booked, cancelled, or a placeholder that voided its key before
// anything was booked under it.
const (
	StatusBooked    = "BOOKED"
	StatusCancelled = "CANCELLED"
	StatusVoided    = "VOIDED"
)

// VoidedID is the id of the placeholder that voids key.
func VoidedID(key string) string { return "VOID-" + key }

// MemoryStore keeps contracts in memory: they are lost with the process and unknown to others.
type MemoryStore struct {
	mu    sync.Mutex
	byKey map[string]*Contract
	byID  map[string]*Contract
}

// NewMemoryStore returns an empty in-memory store.
func NewMemoryStore() *MemoryStore {
	return &MemoryStore{byKey: map[string]*Contract{}, byID: map[string]*Contract{}}
}

// ByKey implements Store.
func (m *MemoryStore) ByKey(_ context.Context, key string) (*Contract, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return copyContract(m.byKey[key]), nil
}

// Insert implements Store.
func (m *MemoryStore) Insert(_ context.Context, key string, c *Contract) (*Contract, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if prior, ok := m.byKey[key]; ok {
		return copyContract(prior), false, nil
	}
	stored := copyContract(c)
	m.byKey[key], m.byID[c.ID] = stored, stored
	return copyContract(stored), true, nil
}

// Get implements Store.
func (m *MemoryStore) Get(_ context.Context, id string) (*Contract, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return copyContract(m.byID[id]), nil
}

// Cancel implements Store.
func (m *MemoryStore) Cancel(_ context.Context, id string) (*Contract, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.byID[id]
	if !ok {
		return nil, nil
	}
	c.Status = "CANCELLED"
	return copyContract(c), nil
}

// Void implements Store.
func (m *MemoryStore) Void(_ context.Context, key, reference string) (*Contract, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.byKey[key]
	if !ok {
		c = &Contract{ID: VoidedID(key), Status: StatusVoided, Reference: reference}
		m.byKey[key], m.byID[c.ID] = c, c
	} else if c.Status == StatusBooked {
		c.Status = StatusCancelled
	}
	return copyContract(c), nil
}

func copyContract(c *Contract) *Contract {
	if c == nil {
		return nil
	}
	out := *c
	return &out
}

// Server is the simulated provider.
type Server struct {
	listener net.Listener
	server   *http.Server
	seed     uint64
	store    Store

	mu       sync.Mutex
	attempts map[string]int // requests seen per key, so a retry rolls anew

	served   atomic.Int64
	bookings atomic.Int64
	serving  atomic.Bool
}

// Listen binds the provider, with its contracts in memory, to addr ("127.0.0.1:0" for a random
// port). Requests that arrive before Serve wait in the listen backlog.
func Listen(addr string, seed uint64) (*Server, error) {
	return ListenStore(addr, seed, NewMemoryStore())
}

// ListenStore is Listen with the contracts in store.
func ListenStore(addr string, seed uint64, store Store) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("fxapi: listening on %s: %w", addr, err)
	}
	s := &Server{listener: ln, seed: seed, store: store, attempts: map[string]int{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/contracts", s.book)
	mux.HandleFunc("POST /v1/contracts/{id}/cancel", s.cancel)
	mux.HandleFunc("POST /v1/contracts/void", s.void)
	mux.HandleFunc("GET /v1/contracts/{id}", s.get)
	s.server = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	return s, nil
}

// URL is the provider's base URL.
func (s *Server) URL() string { return "http://" + s.listener.Addr().String() }

// Serve answers requests in the background until Close.
func (s *Server) Serve() {
	if !s.serving.CompareAndSwap(false, true) {
		return
	}
	go func() { _ = s.server.Serve(s.listener) }()
}

// Close stops the provider, waiting for requests in flight until ctx ends.
func (s *Server) Close(ctx context.Context) error {
	if !s.serving.Load() {
		return s.listener.Close()
	}
	err := s.server.Shutdown(ctx)
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return s.server.Close()
	}
	return err
}

// Bookings is how many distinct contracts the provider booked.
func (s *Server) Bookings() int64 { return s.bookings.Load() }

// Requests is how many requests the provider answered.
func (s *Server) Requests() int64 { return s.served.Load() }

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, code, message string) {
	writeJSON(w, status, Error{Code: code, Message: message})
}

// misbehave applies the X-Simulate header; it reports whether it answered the request.
func (s *Server) misbehave(w http.ResponseWriter, r *http.Request, key string) bool {
	header := r.Header.Get(HeaderSimulate)
	if header == "" {
		return false
	}
	var sim Simulate
	if err := json.Unmarshal([]byte(header), &sim); err != nil {
		writeError(w, http.StatusBadRequest, "INVALID_SIMULATION", err.Error())
		return true
	}
	s.mu.Lock()
	s.attempts[r.URL.Path+"|"+key]++
	attempt := s.attempts[r.URL.Path+"|"+key]
	s.mu.Unlock()
	seed := sim.Seed
	if seed == 0 {
		seed = s.seed
	}
	h := fnv.New64a()
	_, _ = fmt.Fprintf(h, "%s|%s|%d", r.URL.Path, key, attempt)
	rng := rand.New(rand.NewPCG(seed, h.Sum64()))
	u := rng.Float64() * 100
	delay := time.Duration(sim.MinDurationMs) * time.Millisecond
	if sim.MaxDurationMs > sim.MinDurationMs {
		delay += time.Duration(rng.IntN(sim.MaxDurationMs-sim.MinDurationMs+1)) * time.Millisecond
	}
	if delay > 0 {
		select {
		case <-r.Context().Done():
			return true
		case <-time.After(delay):
		}
	}
	switch {
	case u < sim.FailPermanentPct:
		writeError(w, http.StatusBadRequest, "INVALID_REQUEST", "simulated: the provider refuses this request")
	case u < sim.FailPermanentPct+sim.FailTransientPct:
		writeError(w, http.StatusServiceUnavailable, "UNAVAILABLE", "simulated: the provider is unavailable")
	case u < sim.FailPermanentPct+sim.FailTransientPct+sim.FailBusinessRulePct:
		writeError(w, http.StatusConflict, "RATE_REJECTED", "simulated: the quote was rejected")
	case u < sim.FailPermanentPct+sim.FailTransientPct+sim.FailBusinessRulePct+sim.TimeoutPct:
		// Hang until the client gives up.
		select {
		case <-r.Context().Done():
		case <-time.After(time.Minute):
		}
		writeError(w, http.StatusGatewayTimeout, "TIMEOUT", "simulated: no answer in time")
	default:
		return false
	}
	return true
}

func (s *Server) book(w http.ResponseWriter, r *http.Request) {
	s.served.Add(1)
	key := r.Header.Get(HeaderIdempotencyKey)
	if key == "" {
		writeError(w, http.StatusBadRequest, "IDEMPOTENCY_KEY_REQUIRED", "send an Idempotency-Key header")
		return
	}
	var req ContractRequest
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "INVALID_REQUEST", err.Error())
		return
	}
	sell, okSell := usdPer[req.SellCurrency]
	buy, okBuy := usdPer[req.BuyCurrency]
	if !okSell || !okBuy || req.SellCurrency == req.BuyCurrency || !req.SellAmount.IsPositive() {
		writeError(w, http.StatusBadRequest, "INVALID_REQUEST", "unsupported currency pair or amount")
		return
	}
	prior, err := s.store.ByKey(r.Context(), key)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "STORE_UNAVAILABLE", err.Error())
		return
	}
	if prior != nil {
		if prior.Status != StatusBooked {
			writeError(w, http.StatusConflict, "CONTRACT_VOIDED", "the booking under this key was cancelled or voided")
			return
		}
		if !sameRequest(prior, req) {
			writeError(w, http.StatusUnprocessableEntity, "IDEMPOTENCY_KEY_REUSED", "the key was used for a different request")
			return
		}
		writeJSON(w, http.StatusOK, prior)
		return
	}
	if s.misbehave(w, r, key) {
		return
	}
	// A small spread in the provider's favour; rates carry six decimals.
	rate := sell.Div(buy).Mul(decimal.RequireFromString("0.9990")).Round(6)
	contract := &Contract{
		ID: "FXC-" + strings.ToUpper(uuid.NewString()[:18]), SellCurrency: req.SellCurrency, BuyCurrency: req.BuyCurrency,
		SellAmount: req.SellAmount, BuyAmount: req.SellAmount.Mul(rate).Round(minorUnits[req.BuyCurrency]),
		Rate: rate, ValueDate: req.ValueDate, Status: "BOOKED", Reference: req.Reference,
	}
	stored, created, err := s.store.Insert(r.Context(), key, contract)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "STORE_UNAVAILABLE", err.Error())
		return
	}
	if !created { // a concurrent request with the same key won, or a void closed the key
		if stored.Status != StatusBooked {
			writeError(w, http.StatusConflict, "CONTRACT_VOIDED", "the booking under this key was cancelled or voided")
			return
		}
		writeJSON(w, http.StatusOK, stored)
		return
	}
	s.bookings.Add(1)
	writeJSON(w, http.StatusCreated, contract)
}

func sameRequest(c *Contract, r ContractRequest) bool {
	return c.SellCurrency == r.SellCurrency && c.BuyCurrency == r.BuyCurrency && c.SellAmount.Equal(r.SellAmount) && c.ValueDate == r.ValueDate
}

func (s *Server) cancel(w http.ResponseWriter, r *http.Request) {
	s.served.Add(1)
	id := r.PathValue("id")
	key := r.Header.Get(HeaderIdempotencyKey)
	if key == "" {
		writeError(w, http.StatusBadRequest, "IDEMPOTENCY_KEY_REQUIRED", "send an Idempotency-Key header")
		return
	}
	contract, err := s.store.Get(r.Context(), id)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "STORE_UNAVAILABLE", err.Error())
		return
	}
	if contract == nil {
		writeError(w, http.StatusNotFound, "CONTRACT_NOT_FOUND", "no contract "+id)
		return
	}
	// A repeated cancel answers as the first did, without rolling a misbehaviour again.
	if contract.Status != "CANCELLED" && s.misbehave(w, r, key) {
		return
	}
	if contract, err = s.store.Cancel(r.Context(), id); err != nil {
		writeError(w, http.StatusInternalServerError, "STORE_UNAVAILABLE", err.Error())
		return
	}
	writeJSON(w, http.StatusOK, contract)
}

// VoidRequest is the body of POST /v1/contracts/void.
type VoidRequest struct {
	Reference string `json:"reference,omitempty"`
}

// void closes the booking key in the Idempotency-Key header: the contract booked under it is
// cancelled, and when none is booked yet, a booking under the key that arrives later (a request
// still in flight, a retry) is refused with 409 CONTRACT_VOIDED. The client voids a booking
// whose outcome it does not know, where it cannot cancel by contract id. Idempotent.
func (s *Server) void(w http.ResponseWriter, r *http.Request) {
	s.served.Add(1)
	key := r.Header.Get(HeaderIdempotencyKey)
	if key == "" {
		writeError(w, http.StatusBadRequest, "IDEMPOTENCY_KEY_REQUIRED", "send the booking's Idempotency-Key header")
		return
	}
	var req VoidRequest
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "INVALID_REQUEST", err.Error())
		return
	}
	contract, err := s.store.Void(r.Context(), key, req.Reference)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "STORE_UNAVAILABLE", err.Error())
		return
	}
	writeJSON(w, http.StatusOK, contract)
}

func (s *Server) get(w http.ResponseWriter, r *http.Request) {
	s.served.Add(1)
	contract, err := s.store.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		writeError(w, http.StatusInternalServerError, "STORE_UNAVAILABLE", err.Error())
		return
	}
	if contract == nil {
		writeError(w, http.StatusNotFound, "CONTRACT_NOT_FOUND", "no contract "+r.PathValue("id"))
		return
	}
	writeJSON(w, http.StatusOK, contract)
}
