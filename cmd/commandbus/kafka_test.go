package main

// bench events and bench relay publish to an in-process Kafka, which only test binaries and
// builds with the kfake tag link in.
import _ "github.com/commandbus/commandbus/internal/inprocesskafka/kfakecluster"
