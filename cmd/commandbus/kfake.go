//go:build kfake

package main

// Built with -tags kfake, the binary carries an in-process Kafka for bench events and bench
// relay without --brokers. The release binary does not: a fake broker has no place there.
import _ "github.com/commandbus/commandbus/internal/inprocesskafka/kfakecluster"
