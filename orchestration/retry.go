package orchestration

import (
	"math"
	"time"

	"github.com/commandbus/commandbus"
)

// RetryPolicy says how a failing step (or phase, or compensation) of a declarative model is
// retried. Attempts are durable: a retry is a scheduled wake-up of the execution, not a sleeping
// goroutine. Every model shares it, so a policy means the same in a workflow, a saga and a TCC.
type RetryPolicy struct {
	// MaxAttempts is the number of attempts in all (1: no retry). Default:
	// commandbus.DefaultMaxAttempts (3).
	MaxAttempts int
	// InitialDelay is the delay before the second attempt. Default: 1s.
	InitialDelay time.Duration
	// MaxDelay caps the delay. Default: 5m.
	MaxDelay time.Duration
	// Multiplier grows the delay after each attempt. Default: 2.
	Multiplier float64
	// Jitter spreads each delay by up to this fraction (0 to 1), drawn from the model's random
	// source. Default: 0.
	Jitter float64
	// RetryOn decides which errors are retried. Default: those commandbus.Classify calls
	// transient (an error it cannot classify is not retried).
	RetryOn func(error) bool
}

// WithDefaults fills the zero fields with their defaults.
func (p RetryPolicy) WithDefaults() RetryPolicy {
	if p.MaxAttempts <= 0 {
		p.MaxAttempts = commandbus.DefaultMaxAttempts
	}
	if p.InitialDelay <= 0 {
		p.InitialDelay = time.Second
	}
	if p.MaxDelay <= 0 {
		p.MaxDelay = 5 * time.Minute
	}
	if p.Multiplier < 1 {
		p.Multiplier = 2
	}
	if p.RetryOn == nil {
		p.RetryOn = func(err error) bool {
			class, _ := commandbus.Classify(err, commandbus.ClassPermanent)
			return class == commandbus.ClassTransient
		}
	}
	return p
}

// Delay is the wait before attempt+1 after attempt failed, with r in [0, 1) drawing the jitter.
func (p RetryPolicy) Delay(attempt int, r float64) time.Duration {
	d := float64(p.InitialDelay) * math.Pow(p.Multiplier, float64(attempt-1))
	if d > float64(p.MaxDelay) {
		d = float64(p.MaxDelay)
	}
	if p.Jitter > 0 {
		d += d * p.Jitter * (2*r - 1)
	}
	return time.Duration(d)
}
