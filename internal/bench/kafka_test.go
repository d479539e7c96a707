package bench

// The lifecycle events benchmark publishes to an in-process Kafka, which only test binaries and
// builds with the kfake tag link in.
import _ "github.com/commandbus/commandbus/internal/inprocesskafka/kfakecluster"
