package payments_test

import (
	"github.com/commandbus/commandbus/examples/payments"
	"github.com/commandbus/commandbus/process"
	"github.com/commandbus/commandbus/saga"
)

// modelOf is the execution model a payment process type runs on.
func modelOf(typ string) string {
	if typ == payments.TypePaymentSaga {
		return saga.Model
	}
	return process.Model
}
