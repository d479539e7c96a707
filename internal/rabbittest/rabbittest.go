// Package rabbittest finds the RabbitMQ that tests outside the transports run against.
package rabbittest

import (
	"os"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// Dial returns the test RabbitMQ's URL (COMMANDBUS_TEST_AMQP_URL, or the one on localhost) and a
// connection to it, closed when the test ends. When RabbitMQ does not answer the test is
// skipped, or fails under COMMANDBUS_REQUIRE_RABBITMQ=1.
func Dial(tb testing.TB) (string, *amqp091.Connection) {
	tb.Helper()
	url := os.Getenv("COMMANDBUS_TEST_AMQP_URL")
	if url == "" {
		url = "amqp://guest:guest@127.0.0.1:5672/"
	}
	conn, err := amqp091.Dial(url)
	if err != nil {
		if os.Getenv("COMMANDBUS_REQUIRE_RABBITMQ") == "1" {
			tb.Fatalf("RabbitMQ is required (COMMANDBUS_REQUIRE_RABBITMQ=1) but does not answer at %s: %v", url, err)
		}
		tb.Skipf("skipping: RabbitMQ does not answer at %s: %v", url, err)
	}
	tb.Cleanup(func() { _ = conn.Close() })
	return url, conn
}

// URL is Dial for a test that needs only the URL.
func URL(tb testing.TB) string {
	tb.Helper()
	url, _ := Dial(tb)
	return url
}
