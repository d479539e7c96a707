// Package rabbittest finds the RabbitMQ that tests outside the transports run against.
package rabbittest

import (
	"context"
	neturl "net/url"
	"os"
	"testing"
	"time"

	amqp "github.com/Azure/go-amqp"
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

// AMQP10 returns the test RabbitMQ's URL once it accepts an AMQP 1.0 connection too (built into
// RabbitMQ 4.x; a plugin on 3.x). When it does not, the test is skipped, or fails under
// COMMANDBUS_REQUIRE_RABBITMQ=1, saying how to turn AMQP 1.0 on.
func AMQP10(tb testing.TB) string {
	tb.Helper()
	url := URL(tb)
	conn, err := DialAMQP10(url)
	if err == nil {
		_ = conn.Close()
		return url
	}
	const enable = "on RabbitMQ 3.x run: rabbitmq-plugins enable rabbitmq_amqp1_0"
	if os.Getenv("COMMANDBUS_REQUIRE_RABBITMQ") == "1" {
		tb.Fatalf("RabbitMQ is required (COMMANDBUS_REQUIRE_RABBITMQ=1) but does not accept AMQP 1.0 at %s (%s): %v", url, enable, err)
	}
	tb.Skipf("skipping: RabbitMQ does not accept AMQP 1.0 at %s (%s): %v", url, enable, err)
	return ""
}

// DialAMQP10 opens an AMQP 1.0 connection to the broker at rawURL (amqp://user:password@host:port/),
// within 5 seconds.
func DialAMQP10(rawURL string) (*amqp.Conn, error) {
	u, err := neturl.Parse(rawURL)
	if err != nil {
		return nil, err
	}
	password, _ := u.User.Password()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return amqp.Dial(ctx, u.Scheme+"://"+u.Host, &amqp.ConnOptions{SASLType: amqp.SASLTypePlain(u.User.Username(), password)})
}
