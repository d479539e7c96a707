// Package kfakecluster registers franz-go's kfake as the in-process Kafka of package
// inprocesskafka. Import it for its side effect from test files, or from a file built with the
// kfake build tag: never from production code, so the fake stays out of the binary.
package kfakecluster

import (
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/commandbus/commandbus/internal/inprocesskafka"
)

func init() { inprocesskafka.Register(Start) }

// Start starts a one-broker kfake cluster with each topic created with three partitions.
func Start(topics ...string) ([]string, func(), error) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, topics...))
	if err != nil {
		return nil, nil, err
	}
	return cluster.ListenAddrs(), cluster.Close, nil
}
