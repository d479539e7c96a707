package payments

import "context"

// SetAfterAccountsLocked makes SubmitPayment's handler call fn inside its transaction, once it
// holds the accounts' row locks. Set it before the client starts.
func SetAfterAccountsLocked(p *Platform, fn func(ctx context.Context)) { p.afterAccountsLocked = fn }
