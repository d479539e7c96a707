package outbox

import "time"

// ActiveDelay exposes the relay's wait between looks while messages flow, for the tests.
func (r *Relay) ActiveDelay(empty int) time.Duration { return r.activeDelay(empty) }
