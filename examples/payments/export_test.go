package payments

import "context"

// SetAfterAccountsLocked makes SubmitPayment's handler call fn inside its transaction, once it
// holds the accounts' row locks. Set it before the client starts.
func SetAfterAccountsLocked(p *Platform, fn func(ctx context.Context)) { p.afterAccountsLocked = fn }

// SetBeforeFxBooking makes bookFx call fn with the booking's step key before it asks the FX
// provider; an error fn returns ends the booking. Set it before the client starts.
func SetBeforeFxBooking(p *Platform, fn func(ctx context.Context, key string) error) {
	p.beforeFxBooking = fn
}

// SetBeforeFxCancel makes cancelFx call fn before it cancels anything. Set it before the client
// starts.
func SetBeforeFxCancel(p *Platform, fn func(ctx context.Context)) { p.beforeFxCancel = fn }
