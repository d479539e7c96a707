package relaybench

import (
	"context"
	"log/slog"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/notifier"
)

// listen subscribes to topic on a notifier of its own, running until the returned stop.
func listen(drv driver.Driver, topic string) (<-chan struct{}, func()) {
	n := notifier.New(drv.Listener(), slog.New(slog.DiscardHandler))
	ch, unsubscribe := n.Subscribe(topic)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); n.Run(ctx) }()
	return ch, func() { unsubscribe(); cancel(); <-done }
}
