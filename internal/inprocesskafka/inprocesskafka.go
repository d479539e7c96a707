// Package inprocesskafka gives the benchmarks a Kafka inside the process when no broker is named,
// without linking a fake Kafka into the production binary: the implementation (package
// kfakecluster, over franz-go's kfake) registers itself when imported, which only test files
// and binaries built with the kfake build tag do.
package inprocesskafka

import (
	"errors"
	"sync"
)

// ErrUnavailable is returned by Start when no in-process Kafka was linked in.
var ErrUnavailable = errors.New("no in-process Kafka in this binary: pass real brokers (--brokers), or build with `-tags kfake` (go run -tags kfake ./cmd/commandbus ...)")

// StartFunc starts a Kafka cluster in the process with the topics created and returns its
// broker addresses and a function that stops it.
type StartFunc func(topics ...string) (brokers []string, stop func(), err error)

var (
	mu      sync.Mutex
	starter StartFunc
)

// Register installs the implementation Start uses; package kfakecluster calls it from init.
func Register(start StartFunc) {
	mu.Lock()
	defer mu.Unlock()
	starter = start
}

// Available reports whether an implementation is registered.
func Available() bool {
	mu.Lock()
	defer mu.Unlock()
	return starter != nil
}

// Start starts a Kafka cluster in the process with topics created, or returns ErrUnavailable.
func Start(topics ...string) (brokers []string, stop func(), err error) {
	mu.Lock()
	start := starter
	mu.Unlock()
	if start == nil {
		return nil, nil, ErrUnavailable
	}
	return start(topics...)
}
