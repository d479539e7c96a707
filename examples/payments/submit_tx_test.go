package payments_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/examples/payments"
)

// A payment and its execution are written in one transaction: when the execution cannot be
// created, no payment row is left behind (once, a payment without an execution answered 404,
// then 409 to the retry, and never ended), and the client's retry with the same key succeeds.
// The same holds when Options.DB is given and no transaction can span both.
func TestPaymentWithoutExecutionIsNeverLeft(t *testing.T) {
	t.Parallel()
	for _, separate := range []bool{false, true} {
		name := "one transaction"
		if separate {
			name = "Options.DB"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			eachDriver(t, func(t *testing.T, drv driver.Driver) {
				opts := payments.Options{DisableSimulator: true}
				if separate {
					opts.DB, _ = businessDB(t, drv)
				}
				f := setup(t, drv, opts)
				ctx := context.Background()
				refuse, allow := refuseExecutionInserts(drv)
				require.NoError(t, drv.Executor().Exec(ctx, refuse))
				req := validPayment()
				req.ProcessType = payments.TypePaymentManager // it completes without the network
				_, err := f.p.SubmitPayment(ctx, req)
				require.Error(t, err, "the execution insert fails")
				paymentRows, executions := rowCounts(t, drv)
				require.Zero(t, paymentRows, "no payment without its execution")
				require.Zero(t, executions)

				require.NoError(t, drv.Executor().Exec(ctx, allow))
				res, err := f.p.SubmitPayment(ctx, req)
				require.NoError(t, err, "the retry with the same key is a new payment, not a duplicate")
				v := f.waitStatus(res.PaymentID, "COMPLETED")
				require.Equal(t, res.ExecutionID, v.ExecutionID)
				paymentRows, executions = rowCounts(t, drv)
				require.Equal(t, 1, paymentRows)
				require.Equal(t, 1, executions)
			})
		})
	}
}

// refuseExecutionInserts returns statements that make every execution insert fail, and undo it.
func refuseExecutionInserts(drv driver.Driver) (refuse, allow string) {
	if drv.Name() == "postgres" {
		return `CREATE FUNCTION {schema}.refuse_execution() RETURNS trigger LANGUAGE plpgsql AS $$
				BEGIN RAISE EXCEPTION 'execution inserts are refused by the test'; END $$;
			CREATE TRIGGER refuse_execution BEFORE INSERT ON {schema}.execution FOR EACH ROW EXECUTE FUNCTION {schema}.refuse_execution();`,
			`DROP TRIGGER refuse_execution ON {schema}.execution; DROP FUNCTION {schema}.refuse_execution();`
	}
	return `CREATE TRIGGER refuse_execution BEFORE INSERT ON {schema}.execution BEGIN SELECT RAISE(ABORT, 'execution inserts are refused by the test'); END;`,
		`DROP TRIGGER refuse_execution;`
}
