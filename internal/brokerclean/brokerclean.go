// Package brokerclean lets the tests that use the shared test RabbitMQ delete every queue and
// exchange they made it declare, including those the transports declare implicitly (the
// dead-letter, parking and backout queues): queues left behind pile up across runs until the
// broker stops answering. The transports report each name they declare with Declared; that costs
// nothing until a test calls Track, which turns the recording on.
package brokerclean

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

var (
	enabled atomic.Bool
	mu      sync.Mutex
	queues  = map[string]bool{}
	exchs   = map[string]bool{}
	// every name ever recorded and every tracked prefix's broker, for Sweep
	allQueues = map[string]bool{}
	allExchs  = map[string]bool{}
	prefixes  = map[string]string{}
)

// Declared records that queue was declared on the broker (a transport calls it before declaring).
func Declared(queue string) { record(queues, queue); record(allQueues, queue) }

// DeclaredExchange records that exchange was declared on the broker.
func DeclaredExchange(exchange string) { record(exchs, exchange); record(allExchs, exchange) }

func record(set map[string]bool, name string) {
	if !enabled.Load() || name == "" {
		return
	}
	mu.Lock()
	set[name] = true
	mu.Unlock()
}

// TB is the part of testing.TB that Track uses (the package does not import testing: the
// transports, which record into it, are linked into production binaries).
type TB interface {
	Helper()
	Cleanup(func())
	Fatal(args ...any)
	Logf(format string, args ...any)
}

// Track starts recording declarations and, when tb ends, deletes from the broker at url every
// queue and exchange declared in this process whose name starts with prefix, and the extra
// queues named. Call it as soon as the prefix is chosen and before anything that declares with
// it starts: cleanups run last-registered first, so the deletion runs after the test's
// consumers and relays have stopped and cannot redeclare.
func Track(tb TB, url, prefix string, extra ...string) {
	tb.Helper()
	if prefix == "" {
		tb.Fatal("brokerclean.Track: empty prefix would match every queue")
	}
	enabled.Store(true)
	mu.Lock()
	prefixes[prefix] = url
	mu.Unlock()
	tb.Cleanup(func() {
		qs, xs := take(queues, prefix), take(exchs, prefix)
		if err := Delete(url, append(qs, extra...), xs); err != nil {
			tb.Logf("brokerclean: deleting the queues of prefix %s: %v", prefix, err)
		}
	})
}

// Sweep deletes again every queue and exchange recorded in this process under a tracked prefix:
// the safety net for one a goroutine redeclared after its test's cleanup. TestMain runs it
// through Main, once every test has ended.
func Sweep() error {
	mu.Lock()
	byURL := map[string][2][]string{}
	for prefix, url := range prefixes {
		qs, xs := byURL[url][0], byURL[url][1]
		for name := range allQueues {
			if strings.HasPrefix(name, prefix) {
				qs = append(qs, name)
			}
		}
		for name := range allExchs {
			if strings.HasPrefix(name, prefix) {
				xs = append(xs, name)
			}
		}
		byURL[url] = [2][]string{qs, xs}
	}
	mu.Unlock()
	var first error
	for url, names := range byURL {
		if err := Delete(url, names[0], names[1]); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// M is what TestMain runs: testing.M, or goleak's TestingM.
type M interface{ Run() int }

type sweepingM struct{ m M }

// Run runs the tests, then Sweep.
func (s sweepingM) Run() int {
	code := s.m.Run()
	if err := Sweep(); err != nil {
		fmt.Fprintf(os.Stderr, "brokerclean: deleting the tests' queues: %v\n", err)
	}
	return code
}

// Main wraps a package's testing.M so that Sweep runs after its tests:
//
//	func TestMain(m *testing.M) { os.Exit(brokerclean.Main(m).Run()) }
func Main(m M) M { return sweepingM{m} }

// take removes from set and returns the names starting with prefix.
func take(set map[string]bool, prefix string) []string {
	mu.Lock()
	defer mu.Unlock()
	var out []string
	for name := range set {
		if strings.HasPrefix(name, prefix) {
			out = append(out, name)
			delete(set, name)
		}
	}
	return out
}

// Delete deletes queues and exchanges over AMQP 0-9-1, whatever they hold; one that does not
// exist is not an error. It then checks that the queues are gone, and deletes again one that a
// stopping client redeclared meanwhile, for up to 10 seconds.
func Delete(url string, queues, exchanges []string) error {
	if len(queues) == 0 && len(exchanges) == 0 {
		return nil
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		left, err := deleteOnce(url, queues, exchanges)
		if err == nil && len(left) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			if err == nil {
				err = fmt.Errorf("queues still declared: %s", strings.Join(left, ", "))
			}
			return err
		}
		time.Sleep(100 * time.Millisecond) // polling the broker until the queues stay gone
	}
}

// deleteOnce deletes, then returns the queues that exist again.
func deleteOnce(url string, queues, exchanges []string) ([]string, error) {
	conn, err := amqp091.DialConfig(url, amqp091.Config{Dial: amqp091.DefaultDial(5 * time.Second)})
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	// A channel per operation: a failed one (404 on an older broker) closes its channel.
	on := func(f func(ch *amqp091.Channel) error) error {
		ch, err := conn.Channel()
		if err != nil {
			return err
		}
		defer ch.Close()
		return f(ch)
	}
	for _, q := range queues {
		if err := on(func(ch *amqp091.Channel) error { _, err := ch.QueueDelete(q, false, false, false); return err }); err != nil && !notFound(err) {
			return nil, fmt.Errorf("deleting queue %s: %w", q, err)
		}
	}
	for _, x := range exchanges {
		if err := on(func(ch *amqp091.Channel) error { return ch.ExchangeDelete(x, false, false) }); err != nil && !notFound(err) {
			return nil, fmt.Errorf("deleting exchange %s: %w", x, err)
		}
	}
	var left []string
	for _, q := range queues {
		err := on(func(ch *amqp091.Channel) error {
			_, err := ch.QueueDeclarePassive(q, true, false, false, false, nil)
			return err
		})
		switch {
		case err == nil:
			left = append(left, q)
		case !notFound(err):
			return nil, fmt.Errorf("checking queue %s: %w", q, err)
		}
	}
	return left, nil
}

func notFound(err error) bool {
	var e *amqp091.Error
	return errors.As(err, &e) && e.Code == amqp091.NotFound
}
