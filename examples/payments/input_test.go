package payments_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/examples/payments"
)

// businessDB opens the platform's business tables behind drv and returns the table prefix.
func businessDB(t *testing.T, drv driver.Driver) (*sql.DB, string) {
	t.Helper()
	switch d := drv.(type) {
	case interface{ Pool() *pgxpool.Pool }:
		db := stdlib.OpenDBFromPool(d.Pool())
		t.Cleanup(func() { _ = db.Close() })
		return db, `"` + drv.Schema() + `".pay_`
	case interface{ DB() *sql.DB }:
		return d.DB(), "pay_"
	}
	t.Fatalf("unknown driver %T", drv)
	return nil, ""
}

// rowCounts counts the rows a submission could write: payments and executions.
func rowCounts(t *testing.T, drv driver.Driver) (paymentRows, executions int) {
	t.Helper()
	db, prefix := businessDB(t, drv)
	require.NoError(t, db.QueryRowContext(context.Background(), `SELECT count(*) FROM `+prefix+`payment`).Scan(&paymentRows))
	rows, err := drv.Executor().ExecutionList(context.Background(), &driver.ExecutionListParams{Limit: driver.MaxListLimit})
	require.NoError(t, err)
	return paymentRows, len(rows)
}

// fieldsOf lists the fields of the validation errors in err.
func fieldsOf(err error) map[string]string {
	out := map[string]string{}
	var walk func(error)
	walk = func(err error) {
		if joined, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range joined.Unwrap() {
				walk(e)
			}
			return
		}
		var v *commandbus.ValidationError
		if errors.As(err, &v) {
			out[v.Field] = v.Message
		}
	}
	walk(err)
	return out
}

func validPayment() payments.PaymentRequest {
	return payments.PaymentRequest{IdempotencyKey: uuid.NewString(), DebitAccount: "CUST-USD-001", CreditAccount: "BENE-USD-001",
		Amount: "125.50", Currency: "USD"}
}

// Every text field is checked before anything is read or written: a NUL byte (which PostgreSQL
// refuses in TEXT and jsonb, and which once left a payment without its execution), control
// characters, oversized values; amounts are plain decimals within the currency's minor units and
// bound. Each bad request names its field, echoes no oversized value, and writes nothing.
func TestPaymentRequestValidation(t *testing.T) {
	t.Parallel()
	eachDriver(t, func(t *testing.T, drv driver.Driver) {
		f := setup(t, drv, payments.Options{DisableSimulator: true, MaxAmounts: map[string]decimal.Decimal{"GBP": decimal.NewFromInt(1000)}})
		ctx := context.Background()
		huge := strings.Repeat("9", 1<<20)
		for _, tc := range []struct {
			name  string
			edit  func(r *payments.PaymentRequest)
			field string
		}{
			{"NUL in idempotencyKey", func(r *payments.PaymentRequest) { r.IdempotencyKey = "k\x00" }, "idempotencyKey"},
			{"newline in idempotencyKey", func(r *payments.PaymentRequest) { r.IdempotencyKey = "k\n1" }, "idempotencyKey"},
			{"oversized idempotencyKey", func(r *payments.PaymentRequest) { r.IdempotencyKey = strings.Repeat("k", 201) }, "idempotencyKey"},
			{"NUL in debitAccount", func(r *payments.PaymentRequest) { r.DebitAccount = "CUST-USD-001\x00" }, "debitAccount"},
			{"escape in creditAccount", func(r *payments.PaymentRequest) { r.CreditAccount = "\x1b[31mBENE" }, "creditAccount"},
			{"oversized creditAccount", func(r *payments.PaymentRequest) { r.CreditAccount = huge }, "creditAccount"},
			{"NUL in currency", func(r *payments.PaymentRequest) { r.Currency = "US\x00" }, "currency"},
			{"NUL in creditCurrency", func(r *payments.PaymentRequest) { r.CreditCurrency = "EU\x00R" }, "creditCurrency"},
			{"NUL in amount", func(r *payments.PaymentRequest) { r.Amount = "1\x00" }, "amount"},
			{"NUL in valueDate", func(r *payments.PaymentRequest) { r.ValueDate = "2026-11-23\x00" }, "valueDate"},
			{"NUL in processType", func(r *payments.PaymentRequest) { r.ProcessType = "PaymentStep\x00" }, "processType"},
			{"NUL in behaviorPreset", func(r *payments.PaymentRequest) { r.BehaviorPreset = "happy\x00" }, "behaviorPreset"},
			{"NUL in behavior.name", func(r *payments.PaymentRequest) { r.Behavior = &payments.Behavior{Name: "a\x00b"} }, "behavior.name"},
			{"oversized behavior.name", func(r *payments.PaymentRequest) { r.Behavior = &payments.Behavior{Name: huge} }, "behavior.name"},
			{"NUL in a behavior step", func(r *payments.PaymentRequest) {
				r.Behavior = &payments.Behavior{Steps: map[string]payments.StepBehavior{"x\x00": {}}}
			}, "behavior.steps"},
			{"absurd step delay", func(r *payments.PaymentRequest) {
				r.Behavior = &payments.Behavior{Steps: map[string]payments.StepBehavior{payments.StepBookFx: {MaxDurationMs: 1 << 40}}}
			}, "behavior.steps.bookFx"},
			{"exponent", func(r *payments.PaymentRequest) { r.Amount = "1e30" }, "amount"},
			{"upper-case exponent", func(r *payments.PaymentRequest) { r.Amount = "1E2" }, "amount"},
			{"plus sign", func(r *payments.PaymentRequest) { r.Amount = "+5" }, "amount"},
			{"negative", func(r *payments.PaymentRequest) { r.Amount = "-5" }, "amount"},
			{"zero", func(r *payments.PaymentRequest) { r.Amount = "0.00" }, "amount"},
			{"leading space", func(r *payments.PaymentRequest) { r.Amount = " 5" }, "amount"},
			{"trailing point", func(r *payments.PaymentRequest) { r.Amount = "5." }, "amount"},
			{"leading point", func(r *payments.PaymentRequest) { r.Amount = ".5" }, "amount"},
			{"thousands separator", func(r *payments.PaymentRequest) { r.Amount = "1,000" }, "amount"},
			{"hexadecimal", func(r *payments.PaymentRequest) { r.Amount = "0x10" }, "amount"},
			{"NaN", func(r *payments.PaymentRequest) { r.Amount = "NaN" }, "amount"},
			{"Infinity", func(r *payments.PaymentRequest) { r.Amount = "Infinity" }, "amount"},
			{"a megabyte of digits", func(r *payments.PaymentRequest) { r.Amount = huge }, "amount"},
			{"more decimals than cents", func(r *payments.PaymentRequest) { r.Amount = "10.001" }, "amount"},
			{"trailing zeros past the cents", func(r *payments.PaymentRequest) { r.Amount = "10.000" }, "amount"},
			{"decimals in yen", func(r *payments.PaymentRequest) {
				r.DebitAccount, r.CreditAccount, r.Currency, r.Amount = "CUST-JPY-001", "BENE-JPY-001", "JPY", "100.5"
			}, "amount"},
			{"above the default bound", func(r *payments.PaymentRequest) { r.Amount = "1000000000000000000" }, "amount"},
			{"just above the default bound", func(r *payments.PaymentRequest) { r.Amount = "10000000.01" }, "amount"},
			{"above the configured bound", func(r *payments.PaymentRequest) {
				r.DebitAccount, r.CreditAccount, r.Currency, r.Amount = "CUST-GBP-001", "BENE-GBP-001", "GBP", "1000.01"
			}, "amount"},
			{"value date 26 years ago", func(r *payments.PaymentRequest) { r.ValueDate = "2000-11-23" }, "valueDate"},
			{"value date two years ahead", func(r *payments.PaymentRequest) { r.ValueDate = "2028-11-23" }, "valueDate"},
			{"cutoff past", func(r *payments.PaymentRequest) { c := testStart.Add(-time.Minute); r.Cutoff = &c }, "cutoff"},
			{"cutoff in a century", func(r *payments.PaymentRequest) { c := testStart.AddDate(100, 0, 0); r.Cutoff = &c }, "cutoff"},
			{"unknown process type", func(r *payments.PaymentRequest) { r.ProcessType = "step" }, "processType"},
			{"unknown preset", func(r *payments.PaymentRequest) { r.BehaviorPreset = "nonsense" }, "behaviorPreset"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				req := validPayment()
				tc.edit(&req)
				beforePayments, beforeExecutions := rowCounts(t, drv)
				_, err := f.p.SubmitPayment(ctx, req)
				require.Error(t, err)
				fields := fieldsOf(err)
				require.Contains(t, fields, tc.field, "%v", err)
				require.Less(t, len(err.Error()), 2000, "the error never echoes a whole oversized input")
				afterPayments, afterExecutions := rowCounts(t, drv)
				require.Equal(t, beforePayments, afterPayments, "a refused payment writes no row")
				require.Equal(t, beforeExecutions, afterExecutions, "a refused payment starts no execution")
			})
		}

		// The bounds themselves are allowed, and trailing zeros within the minor units are fine.
		for _, req := range []payments.PaymentRequest{
			{IdempotencyKey: "at-the-bound", DebitAccount: "CUST-GBP-001", CreditAccount: "BENE-GBP-001", Amount: "1000.00", Currency: "GBP"},
			{IdempotencyKey: "yen", DebitAccount: "CUST-JPY-001", CreditAccount: "BENE-JPY-001", Amount: "1500", Currency: "JPY"},
			{IdempotencyKey: "lower-case currency", DebitAccount: "CUST-USD-001", CreditAccount: "BENE-USD-001", Amount: "0.01", Currency: "usd"},
		} {
			res, err := f.p.SubmitPayment(ctx, req)
			require.NoError(t, err, req.IdempotencyKey)
			v, err := f.p.GetPayment(ctx, res.PaymentID)
			require.NoError(t, err)
			require.Equal(t, req.IdempotencyKey, v.IdempotencyKey)
		}
	})
}

// A platform refuses a MaxAmounts entry it cannot apply.
func TestMaxAmountsOption(t *testing.T) {
	t.Parallel()
	eachDriver(t, func(t *testing.T, drv driver.Driver) {
		client, err := commandbus.NewClient(drv, &commandbus.Config{})
		require.NoError(t, err)
		_, err = payments.New(client, payments.Options{DisableSimulator: true, MaxAmounts: map[string]decimal.Decimal{
			"SEK": decimal.NewFromInt(5), "USD": decimal.NewFromInt(-1)}})
		require.ErrorContains(t, err, "SEK")
		require.ErrorContains(t, err, "MaxAmounts[USD] must be positive")
	})
}

// A batch's day follows the payments' value-date rule; its behavior's texts are checked too.
func TestBatchRequestValidation(t *testing.T) {
	t.Parallel()
	eachDriver(t, func(t *testing.T, drv driver.Driver) {
		f := setup(t, drv, payments.Options{DisableSimulator: true})
		ctx := context.Background()
		for _, tc := range []struct {
			name     string
			count    int
			day, typ string
			behavior *payments.Behavior
			field    string
		}{
			{"26 years in the past", 5, "2000-11-23", payments.TypePaymentStep, nil, "day"},
			{"yesterday", 5, "2026-11-22", payments.TypePaymentStep, nil, "day"},
			{"two years ahead", 5, "2028-11-23", payments.TypePaymentStep, nil, "day"},
			{"not a date", 5, "23/11/2026", payments.TypePaymentStep, nil, "day"},
			{"NUL in the day", 5, "2026-11-23\x00", payments.TypePaymentStep, nil, "day"},
			{"no payments", 0, today, payments.TypePaymentStep, nil, "count"},
			{"negative count", -3, today, payments.TypePaymentStep, nil, "count"},
			{"absurd count", 1 << 40, today, payments.TypePaymentStep, nil, "count"},
			{"unknown process type", 5, today, "manager", nil, "processType"},
			{"NUL in the behavior name", 5, today, payments.TypePaymentStep, &payments.Behavior{Name: "x\x00"}, "behavior.name"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				beforePayments, beforeExecutions := rowCounts(t, drv)
				_, err := f.p.CreateBatch(ctx, tc.count, tc.day, tc.typ, tc.behavior)
				require.Contains(t, fieldsOf(err), tc.field, "%v", err)
				afterPayments, afterExecutions := rowCounts(t, drv)
				require.Equal(t, beforePayments, afterPayments)
				require.Equal(t, beforeExecutions, afterExecutions)
				batches, err := f.p.ListBatches(ctx, payments.ListParams{})
				require.NoError(t, err)
				require.Empty(t, batches)
			})
		}
		batch, err := f.p.CreateBatch(ctx, 2, "", "", nil)
		require.NoError(t, err, "day and process type default to today and PaymentStep")
		require.Equal(t, today, batch.ScheduledFor)
		require.Equal(t, payments.TypePaymentStep, batch.ProcessType)
	})
}

// Reasons are capped at commandbus.MaxReasonLength characters and must be printable: a reason of
// a megabyte was once stored in the audit log and copied into the payment's error message.
func TestOperatorReasonsAreCapped(t *testing.T) {
	t.Parallel()
	eachDriver(t, func(t *testing.T, drv driver.Driver) {
		f := setup(t, drv, payments.Options{DisableSimulator: true})
		ctx := context.Background()
		req := validPayment()
		req.Amount = "75000" // above the approval threshold: risk asks an operator
		res := f.submit(req)
		var approval *payments.Approval
		eventually(t, 20*time.Second, "an approval", func() bool {
			list, err := f.p.ListApprovals(ctx, payments.ApprovalFilter{Status: payments.ApprovalPending})
			require.NoError(t, err)
			for _, a := range list {
				if a.PaymentID == res.PaymentID {
					approval = a
				}
			}
			return approval != nil
		})
		for _, reason := range []string{strings.Repeat("r", commandbus.MaxReasonLength+1), strings.Repeat("r", 1<<20), "ok\x00", "  "} {
			err := f.p.Reject(ctx, approval.ID, "alice@ops", reason)
			require.Contains(t, fieldsOf(err), "reason")
			require.Less(t, len(err.Error()), 500)
			a, err := f.p.GetApproval(ctx, approval.ID)
			require.NoError(t, err)
			require.Equal(t, payments.ApprovalPending, a.Status, "a refused decision changes nothing")
		}
		require.NoError(t, f.p.Reject(ctx, approval.ID, "alice@ops", strings.Repeat("r", commandbus.MaxReasonLength-11)+"\nsee ticket"))
		v := f.waitStatus(res.PaymentID, "COMPENSATED")
		require.LessOrEqual(t, len(v.ErrorMessage), 2*commandbus.MaxReasonLength)
	})
}
