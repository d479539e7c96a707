package paymentsweb

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus/examples/payments"
)

func TestLevelRows(t *testing.T) {
	t.Parallel()
	levels := func(received int, errAt int) []payments.LevelView {
		var out []payments.LevelView
		for n := 1; n <= 4; n++ {
			l := payments.LevelView{Level: n}
			l.Received = n <= received
			if n == errAt {
				l.Received, l.ErrorCode, l.ErrorMessage = true, "PERM_ERROR", "simulated"
			}
			out = append(out, l)
		}
		return out
	}
	statuses := func(rows []levelRow) []string {
		var out []string
		for _, r := range rows {
			out = append(out, r.Status)
		}
		return out
	}
	// Before submission nothing is reached; only the level a payment waits at says WAITING.
	require.Equal(t, []string{"NOT REACHED", "NOT REACHED", "NOT REACHED", "NOT REACHED"},
		statuses(levelRows(&payments.PaymentView{Status: "WAITING", CurrentWait: "bookRisk", Network: levels(0, 0)}, nil)))
	require.Equal(t, []string{"RECEIVED", "WAITING", "NOT REACHED", "NOT REACHED"},
		statuses(levelRows(&payments.PaymentView{Status: "WAITING", CurrentWait: "awaitL2", Network: levels(1, 0)}, nil)))
	require.Equal(t, []string{"RECEIVED", "WAITING FOR OPERATOR", "NOT REACHED", "NOT REACHED"},
		statuses(levelRows(&payments.PaymentView{Status: "WAITING", CurrentWait: "awaitL2", Network: levels(1, 0)},
			[]*payments.PendingNetworkResponse{{Level: 2}})))
	require.Equal(t, []string{"RECEIVED", "RECEIVED", "STOPPED", "NOT REACHED"},
		statuses(levelRows(&payments.PaymentView{Status: "IN_TSQ", Step: "awaitL3", CurrentWait: "awaitL3", Network: levels(2, 0)}, nil)))
	require.Equal(t, []string{"FAILED", "NOT REACHED", "NOT REACHED", "NOT REACHED"},
		statuses(levelRows(&payments.PaymentView{Status: "IN_TSQ", Step: "awaitL1", Network: levels(0, 1)}, nil)))
	require.Equal(t, []string{"RECEIVED", "RECEIVED", "NOT RECEIVED", "NOT REACHED"},
		statuses(levelRows(&payments.PaymentView{Status: "COMPENSATED", Step: "awaitL3", Network: levels(2, 0)}, nil)))
}

// Command TSQ, process TSQ, approvals and network rows say which payment they are about:
// reference, amount, parties, batch and age, with links to the payment, and the two TSQs link to
// each other.
