package server_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/examples/payments"
	"github.com/commandbus/commandbus/internal/dbtest"
	"github.com/commandbus/commandbus/internal/servertest"
	. "github.com/commandbus/commandbus/server"
)

// snapshot is everything a refused request could have written: row counts and the statuses of
// the items the requests are about.
type snapshot struct {
	Payments, Batches, Executions, AuditEntries, CommandsInTSQ int
	PendingApprovals, PendingNetwork                           int
	CommandStatus, ProcessStatus                               string
}

func businessTables(t *testing.T, drv driver.Driver) (*sql.DB, string) {
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

func takeSnapshot(t *testing.T, f *consoleFixture, db *sql.DB, prefix string, command, execution uuid.UUID) snapshot {
	t.Helper()
	ctx := context.Background()
	var s snapshot
	count := func(query string, into *int) {
		require.NoError(t, db.QueryRowContext(ctx, strings.ReplaceAll(query, "{t}", prefix)).Scan(into))
	}
	count(`SELECT count(*) FROM {t}payment`, &s.Payments)
	count(`SELECT count(*) FROM {t}batch_run`, &s.Batches)
	count(`SELECT count(*) FROM {t}approval WHERE status = 'PENDING'`, &s.PendingApprovals)
	count(`SELECT count(*) FROM {t}network_pending WHERE status = 'PENDING'`, &s.PendingNetwork)
	executions, err := f.Client.Driver().Executor().ExecutionList(ctx, &driver.ExecutionListParams{Limit: driver.MaxListLimit})
	require.NoError(t, err)
	s.Executions = len(executions)
	audit, err := f.Client.AuditLog(ctx, &driver.AuditLogListParams{Limit: driver.MaxListLimit})
	require.NoError(t, err)
	s.AuditEntries = len(audit)
	tsq, err := f.Client.TSQ().List(ctx, commandbus.TSQFilter{Limit: driver.MaxListLimit})
	require.NoError(t, err)
	s.CommandsInTSQ = len(tsq)
	row, err := f.Client.GetCommand(ctx, command)
	require.NoError(t, err)
	s.CommandStatus = string(row.Status)
	x, err := f.Client.Driver().Executor().ExecutionGet(ctx, execution)
	require.NoError(t, err)
	s.ProcessStatus = string(x.Status)
	return s
}

// badRequest is one request the API must refuse.
type badRequest struct {
	name    string
	method  string
	path    string // {command}, {process}, {approval}, {network}, {payment} and {execution} stand for real ids
	body    string // raw; "" sends none
	headers map[string]string
	status  int    // default 400
	field   string // the field the problem names; "" when the problem is about the whole request
	code    string // the problem's code when no field is named
	// undocumented says the document has no operation for the request (an unknown route,
	// action or method), so the answer cannot be checked against one.
	undocumented bool
}

// The "200 bad requests" of the issue, on both drivers: every route gets NUL bytes, control
// characters, data after the JSON, unknown fields, wrong types, unknown enum values, negative and
// absurd numbers, oversized values and bodies, and bad query parameters. Each is refused with a
// 4xx application/problem+json that names the field (and matches the OpenAPI document), echoes
// no oversized input, and changes nothing in the database.
func TestAPIRefusesBadInput(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		f := setupConsole(t, drv)
		doc := loadAPIDoc(t, f.HTTP.URL)
		db, prefix := businessTables(t, drv)
		ctx := context.Background()

		// Real items for the actions, so a refused action could have changed something.
		payment, command := f.ParkRiskCommand()
		parked := f.ParkManagerPayment()
		approval := f.WaitApproval(f.Submit(servertest.BigPayment()).PaymentID)
		pendingPayment := f.Submit(servertest.PendingL2Payment())
		var network uuid.UUID
		servertest.Eventually(t, 30*time.Second, "a pending L2 confirmation", func() bool {
			list, err := f.Platform.ListPendingNetworkResponses(ctx, payments.ListParams{})
			require.NoError(t, err)
			for _, p := range list {
				if p.PaymentID == pendingPayment.PaymentID {
					network = p.ID
				}
			}
			return network != uuid.Nil
		})
		ids := strings.NewReplacer("{command}", command.ID.String(), "{process}", parked.ExecutionID.String(),
			"{approval}", approval.ID.String(), "{network}", network.String(), "{payment}", payment.PaymentID.String(),
			"{execution}", payment.ExecutionID.String())

		valid := map[string]any{"idempotencyKey": "bad-input-1", "debitAccount": "CUST-USD-001", "creditAccount": "BENE-USD-001",
			"amount": "100.00", "currency": "USD"}
		payment_ := func(field string, value any) string {
			body := map[string]any{}
			for k, v := range valid {
				body[k] = v
			}
			if strings.Contains(field, ".") {
				outer, inner, _ := strings.Cut(field, ".")
				body[outer] = map[string]any{inner: value}
			} else {
				body[field] = value
			}
			data, err := json.Marshal(body)
			require.NoError(t, err)
			return string(data)
		}
		validJSON := payment_("idempotencyKey", "bad-input-1")
		megabyte := strings.Repeat("x", 1<<20)
		long := strings.Repeat("k", 300)
		nul, esc := "a\x00b", "a\x1bb"

		cases := []badRequest{
			{name: "trailing JSON object", method: "POST", path: "/api/payments", body: validJSON + ` {"amount":"99999"}`, field: "body"},
			{name: "trailing JSON without space", method: "POST", path: "/api/payments", body: validJSON + `{"amount":"99999"}`, field: "body"},
			{name: "trailing garbage", method: "POST", path: "/api/payments", body: validJSON + ` x`, field: "body"},
			{name: "trailing array", method: "POST", path: "/api/payments", body: validJSON + `[]`, field: "body"},
			{name: "unknown field", method: "POST", path: "/api/payments", body: payment_("amont", "1"), field: "amont"},
			{name: "unknown nested field", method: "POST", path: "/api/payments", body: payment_("behavior.colour", "red"), field: "colour"},
			{name: "array body", method: "POST", path: "/api/payments", body: `[]`, field: "body"},
			{name: "string body", method: "POST", path: "/api/payments", body: `"pay"`, field: "body"},
			{name: "null body", method: "POST", path: "/api/payments", body: `null`, field: "idempotencyKey"},
			{name: "empty object", method: "POST", path: "/api/payments", body: `{}`, field: "amount"},
			{name: "truncated JSON", method: "POST", path: "/api/payments", body: `{"amount":`, field: "body"},
			{name: "malformed JSON", method: "POST", path: "/api/payments", body: `{amount: 1}`, field: "body"},
			{name: "query parameter on a POST", method: "POST", path: "/api/payments?dryRun=1", body: validJSON, field: "dryRun"},
			{name: "form content type", method: "POST", path: "/api/payments", body: validJSON,
				headers: map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, status: 415, code: "UNSUPPORTED_MEDIA_TYPE"},
			{name: "oversized body", method: "POST", path: "/api/payments", body: payment_("idempotencyKey", megabyte), status: 413, code: "PAYLOAD_TOO_LARGE"},
			{name: "amount as a number", method: "POST", path: "/api/payments", body: payment_("amount", 100), field: "amount"},
			{name: "amount with exponent", method: "POST", path: "/api/payments", body: payment_("amount", "1e30"), field: "amount"},
			{name: "amount of 10^30", method: "POST", path: "/api/payments", body: payment_("amount", "1"+strings.Repeat("0", 30)), field: "amount"},
			{name: "amount above the bound", method: "POST", path: "/api/payments", body: payment_("amount", "10000000.01"), field: "amount"},
			{name: "negative amount", method: "POST", path: "/api/payments", body: payment_("amount", "-5"), field: "amount"},
			{name: "zero amount", method: "POST", path: "/api/payments", body: payment_("amount", "0"), field: "amount"},
			{name: "amount with three decimals", method: "POST", path: "/api/payments", body: payment_("amount", "1.001"), field: "amount"},
			{name: "amount NaN", method: "POST", path: "/api/payments", body: payment_("amount", "NaN"), field: "amount"},
			{name: "oversized amount", method: "POST", path: "/api/payments", body: payment_("amount", strings.Repeat("9", 40000)), field: "amount"},
			{name: "NUL in the key", method: "POST", path: "/api/payments", body: payment_("idempotencyKey", nul), field: "idempotencyKey"},
			{name: "escape in the key", method: "POST", path: "/api/payments", body: payment_("idempotencyKey", esc), field: "idempotencyKey"},
			{name: "C1 control in the key", method: "POST", path: "/api/payments", body: payment_("idempotencyKey", "a\u0085"), field: "idempotencyKey"},
			{name: "oversized key", method: "POST", path: "/api/payments", body: payment_("idempotencyKey", long), field: "idempotencyKey"},
			{name: "key as a number", method: "POST", path: "/api/payments", body: payment_("idempotencyKey", 7), field: "idempotencyKey"},
			{name: "NUL in the debit account", method: "POST", path: "/api/payments", body: payment_("debitAccount", "CUST-USD-001\x00"), field: "debitAccount"},
			{name: "NUL in the credit account", method: "POST", path: "/api/payments", body: payment_("creditAccount", nul), field: "creditAccount"},
			{name: "unknown credit account", method: "POST", path: "/api/payments", body: payment_("creditAccount", "BENE-USD-999"), field: "creditAccount"},
			{name: "NUL in the currency", method: "POST", path: "/api/payments", body: payment_("currency", "US\x00"), field: "currency"},
			{name: "unknown currency", method: "POST", path: "/api/payments", body: payment_("currency", "XYZ"), field: "currency"},
			{name: "NUL in the credit currency", method: "POST", path: "/api/payments", body: payment_("creditCurrency", nul), field: "creditCurrency"},
			{name: "NUL in the value date", method: "POST", path: "/api/payments", body: payment_("valueDate", "2026-11-23\x00"), field: "valueDate"},
			{name: "value date in the past", method: "POST", path: "/api/payments", body: payment_("valueDate", "2000-01-01"), field: "valueDate"},
			{name: "impossible value date", method: "POST", path: "/api/payments", body: payment_("valueDate", "2026-13-45"), field: "valueDate"},
			{name: "cutoff not a time", method: "POST", path: "/api/payments", body: payment_("cutoff", "tomorrow"), field: "cutoff"},
			{name: "cutoff as a number", method: "POST", path: "/api/payments", body: payment_("cutoff", 123), field: "cutoff"},
			{name: "cutoff in the past", method: "POST", path: "/api/payments", body: payment_("cutoff", "2001-01-01T00:00:00Z"), field: "cutoff"},
			{name: "NUL in the process type", method: "POST", path: "/api/payments", body: payment_("processType", "PaymentStep\x00"), field: "processType"},
			{name: "unknown process type", method: "POST", path: "/api/payments", body: payment_("processType", "step"), field: "processType"},
			{name: "process type as a number", method: "POST", path: "/api/payments", body: payment_("processType", 1), field: "processType"},
			{name: "NUL in the preset", method: "POST", path: "/api/payments", body: payment_("behaviorPreset", nul), field: "behaviorPreset"},
			{name: "unknown preset", method: "POST", path: "/api/payments", body: payment_("behaviorPreset", "wild"), field: "behaviorPreset"},
			{name: "NUL in behavior.name", method: "POST", path: "/api/payments", body: payment_("behavior.name", nul), field: "behavior.name"},
			{name: "oversized behavior.name", method: "POST", path: "/api/payments", body: payment_("behavior.name", long), field: "behavior.name"},
			{name: "behavior as a string", method: "POST", path: "/api/payments", body: payment_("behavior", "chaos"), field: "behavior"},
			{name: "NUL in a behavior step", method: "POST", path: "/api/payments", body: payment_("behavior.steps", map[string]any{nul: map[string]any{}}), field: "behavior.steps"},
			{name: "unknown behavior step", method: "POST", path: "/api/payments", body: payment_("behavior.steps", map[string]any{"teleport": map[string]any{}}), field: "behavior.steps.teleport"},
			{name: "percentage above 100", method: "POST", path: "/api/payments", body: payment_("behavior.steps", map[string]any{"bookFx": map[string]any{"timeoutPct": 150}}), field: "behavior.steps.bookFx"},
			{name: "negative percentage", method: "POST", path: "/api/payments", body: payment_("behavior.steps", map[string]any{"bookFx": map[string]any{"timeoutPct": -1}}), field: "behavior.steps.bookFx"},
			{name: "absurd delay", method: "POST", path: "/api/payments", body: payment_("behavior.steps", map[string]any{"bookFx": map[string]any{"maxDurationMs": 1e15}}), field: "behavior.steps.bookFx"},
			{name: "negative seed", method: "POST", path: "/api/payments", body: payment_("behavior.seed", -1), field: "behavior.seed"},

			{name: "limit -1", method: "GET", path: "/api/payments?limit=-1", field: "limit"},
			{name: "limit 0", method: "GET", path: "/api/payments?limit=0", field: "limit"},
			{name: "limit abc", method: "GET", path: "/api/payments?limit=abc", field: "limit"},
			{name: "limit too large", method: "GET", path: "/api/payments?limit=1000000", field: "limit"},
			{name: "limit twice", method: "GET", path: "/api/payments?limit=1&limit=2", field: "limit"},
			{name: "unknown status", method: "GET", path: "/api/payments?status=nonsense", field: "status"},
			{name: "NUL in status", method: "GET", path: "/api/payments?status=%00", field: "status"},
			{name: "unknown process type filter", method: "GET", path: "/api/payments?processType=step", field: "processType"},
			{name: "batch not a UUID", method: "GET", path: "/api/payments?batch=today", field: "batch"},
			{name: "unknown parameter", method: "GET", path: "/api/payments?sort=amount", field: "sort"},
			{name: "oversized parameter name", method: "GET", path: "/api/payments?" + strings.Repeat("p", 500) + "=1", field: "query"},
			{name: "payment id not a UUID", method: "GET", path: "/api/payments/42", field: "id"},
			{name: "payment query parameter", method: "GET", path: "/api/payments/{payment}?expand=all", field: "expand"},
			{name: "unknown payment", method: "GET", path: "/api/payments/" + uuid.NewString(), status: 404, code: "NOT_FOUND"},
			{name: "process id not a UUID", method: "GET", path: "/api/payments/42/status", field: "processId"},
			{name: "unknown process status", method: "GET", path: "/api/payments/" + uuid.NewString() + "/status", status: 404, code: "NOT_FOUND"},

			{name: "batch count 0", method: "POST", path: "/api/batches", body: `{"count":0}`, field: "count"},
			{name: "negative batch count", method: "POST", path: "/api/batches", body: `{"count":-1}`, field: "count"},
			{name: "absurd batch count", method: "POST", path: "/api/batches", body: `{"count":1000000000000}`, field: "count"},
			{name: "batch count beyond int64", method: "POST", path: "/api/batches", body: `{"count":1e40}`, field: "count"},
			{name: "fractional batch count", method: "POST", path: "/api/batches", body: `{"count":1.5}`, field: "count"},
			{name: "batch count as a string", method: "POST", path: "/api/batches", body: `{"count":"5"}`, field: "count"},
			{name: "batch day 26 years ago", method: "POST", path: "/api/batches", body: `{"count":5,"day":"2000-11-23"}`, field: "day"},
			{name: "batch day yesterday", method: "POST", path: "/api/batches", body: `{"count":5,"day":"2026-11-22"}`, field: "day"},
			{name: "NUL in the batch day", method: "POST", path: "/api/batches", body: `{"count":5,"day":"2026-11-23\u0000"}`, field: "day"},
			{name: "unknown batch process type", method: "POST", path: "/api/batches", body: `{"count":5,"processType":"manager"}`, field: "processType"},
			{name: "unknown batch preset", method: "POST", path: "/api/batches", body: `{"count":5,"behaviorPreset":"wild"}`, field: "behaviorPreset"},
			{name: "behavior and preset", method: "POST", path: "/api/batches", body: `{"count":5,"behaviorPreset":"happy","behavior":{"name":"x"}}`, field: "behaviorPreset"},
			{name: "NUL in the batch behavior name", method: "POST", path: "/api/batches", body: `{"count":5,"behavior":{"name":"\u0000"}}`, field: "behavior.name"},
			{name: "unknown batch field", method: "POST", path: "/api/batches", body: `{"count":5,"size":5}`, field: "size"},
			{name: "trailing JSON after a batch", method: "POST", path: "/api/batches", body: `{"count":5} {"count":500}`, field: "body"},
			{name: "batch limit too large", method: "GET", path: "/api/batches?limit=201", field: "limit"},
			{name: "batch limit abc", method: "GET", path: "/api/batches?limit=abc", field: "limit"},
			{name: "batch id not a UUID", method: "GET", path: "/api/batches/first", field: "id"},
			{name: "unknown batch", method: "GET", path: "/api/batches/" + uuid.NewString(), status: 404, code: "NOT_FOUND"},

			{name: "unknown approval status", method: "GET", path: "/api/approvals?status=nonsense", field: "status"},
			{name: "approval limit -1", method: "GET", path: "/api/approvals?limit=-1", field: "limit"},
			{name: "approve without reason", method: "POST", path: "/api/approvals/{approval}/approve", body: `{}`, field: "reason"},
			{name: "approve with a blank reason", method: "POST", path: "/api/approvals/{approval}/approve", body: `{"reason":"   "}`, field: "reason"},
			{name: "approve with a long reason", method: "POST", path: "/api/approvals/{approval}/approve", body: `{"reason":"` + strings.Repeat("r", 501) + `"}`, field: "reason"},
			{name: "reject with a 60 KB reason", method: "POST", path: "/api/approvals/{approval}/reject", body: `{"reason":"` + strings.Repeat("r", 60000) + `"}`, field: "reason"},
			{name: "reject with a megabyte reason", method: "POST", path: "/api/approvals/{approval}/reject", body: `{"reason":"` + megabyte + `"}`, status: 413, code: "PAYLOAD_TOO_LARGE"},
			{name: "approve with NUL in the reason", method: "POST", path: "/api/approvals/{approval}/approve", body: `{"reason":"ok\u0000"}`, field: "reason"},
			{name: "approve with a reason as a number", method: "POST", path: "/api/approvals/{approval}/approve", body: `{"reason":5}`, field: "reason"},
			{name: "approve with an unknown field", method: "POST", path: "/api/approvals/{approval}/approve", body: `{"reason":"ok","amount":"1"}`, field: "amount"},
			{name: "approve with trailing JSON", method: "POST", path: "/api/approvals/{approval}/approve", body: `{"reason":"ok"}{"reason":"again"}`, field: "body"},
			{name: "approval id not a UUID", method: "POST", path: "/api/approvals/nope/approve", body: `{"reason":"ok"}`, field: "id"},
			{name: "unknown decision", method: "POST", path: "/api/approvals/{approval}/maybe", body: `{"reason":"ok"}`, status: 404, code: "NOT_FOUND", undocumented: true},
			{name: "unknown approval", method: "POST", path: "/api/approvals/" + uuid.NewString() + "/approve", body: `{"reason":"ok"}`, status: 404, code: "NOT_FOUND"},

			{name: "network limit -1", method: "GET", path: "/api/network/pending?limit=-1", field: "limit"},
			{name: "respond without an answer", method: "POST", path: "/api/network/pending/{network}/respond", body: `{"reason":"ok"}`, field: "answer"},
			{name: "respond with an unknown answer", method: "POST", path: "/api/network/pending/{network}/respond", body: `{"answer":"MAYBE","reason":"ok"}`, field: "answer"},
			{name: "respond with NUL in the answer", method: "POST", path: "/api/network/pending/{network}/respond", body: `{"answer":"ACCEPT\u0000","reason":"ok"}`, field: "answer"},
			{name: "respond with a contradiction", method: "POST", path: "/api/network/pending/{network}/respond", body: `{"answer":"ACCEPT","success":false,"reason":"ok"}`, field: "success"},
			{name: "respond with success as a string", method: "POST", path: "/api/network/pending/{network}/respond", body: `{"success":"yes","reason":"ok"}`, field: "success"},
			{name: "respond with an escape in the reason", method: "POST", path: "/api/network/pending/{network}/respond", body: `{"answer":"ACCEPT","reason":"\u001b[2J"}`, field: "reason"},
			{name: "respond with an error code", method: "POST", path: "/api/network/pending/{network}/respond", body: `{"answer":"REJECT","reason":"ok","errorCode":"X"}`, field: "errorCode"},
			{name: "respond to an unknown response", method: "POST", path: "/api/network/pending/" + uuid.NewString() + "/respond", body: `{"answer":"ACCEPT","reason":"ok"}`, status: 404, code: "NOT_FOUND"},

			{name: "command TSQ limit -1", method: "GET", path: "/api/tsq/commands?limit=-1", field: "limit"},
			{name: "command TSQ batch not a UUID", method: "GET", path: "/api/tsq/commands?batch=x", field: "batch"},
			{name: "command TSQ NUL domain", method: "GET", path: "/api/tsq/commands?domain=%00", field: "domain"},
			{name: "command TSQ unknown parameter", method: "GET", path: "/api/tsq/commands?status=IN_TSQ", field: "status"},
			{name: "retry a command without reason", method: "POST", path: "/api/tsq/commands/{command}/retry", body: `{}`, field: "reason"},
			{name: "retry a command with a long reason", method: "POST", path: "/api/tsq/commands/{command}/retry", body: `{"reason":"` + strings.Repeat("r", 501) + `"}`, field: "reason"},
			{name: "retry a command with NUL in the reason", method: "POST", path: "/api/tsq/commands/{command}/retry", body: `{"reason":"\u0000"}`, field: "reason"},
			{name: "retry a command with a result", method: "POST", path: "/api/tsq/commands/{command}/retry", body: `{"reason":"ok","result":{}}`, field: "result"},
			{name: "cancel a command with trailing JSON", method: "POST", path: "/api/tsq/commands/{command}/cancel", body: `{"reason":"ok"} {}`, field: "body"},
			{name: "complete a command with NUL in the result", method: "POST", path: "/api/tsq/commands/{command}/complete", body: `{"reason":"ok","result":{"ref":"\u0000"}}`, field: "result.ref"},
			{name: "complete a command with a NUL key", method: "POST", path: "/api/tsq/commands/{command}/complete", body: `{"reason":"ok","result":{"\u0000":1}}`, field: "result"},
			{name: "unknown command action", method: "POST", path: "/api/tsq/commands/{command}/explode", body: `{"reason":"ok"}`, status: 404, code: "NOT_FOUND", undocumented: true},
			{name: "command id not a UUID", method: "POST", path: "/api/tsq/commands/abc/retry", body: `{"reason":"ok"}`, field: "id"},
			{name: "command query parameter", method: "GET", path: "/api/commands/{command}?verbose=1", field: "verbose"},
			{name: "get a command with a bad id", method: "GET", path: "/api/commands/abc", field: "id"},

			{name: "process TSQ limit abc", method: "GET", path: "/api/tsq/processes?limit=abc", field: "limit"},
			{name: "process TSQ NUL type", method: "GET", path: "/api/tsq/processes?type=%00", field: "type"},
			{name: "process TSQ oversized type", method: "GET", path: "/api/tsq/processes?type=" + long, field: "type"},
			{name: "complete a payment without evidence", method: "POST", path: "/api/tsq/processes/{process}/complete", body: `{"reason":"ok"}`, field: "stateOverrides.evidence"},
			{name: "complete a payment with blank evidence", method: "POST", path: "/api/tsq/processes/{process}/complete", body: `{"reason":"ok","stateOverrides":{"evidence":"  "}}`, field: "stateOverrides.evidence"},
			{name: "complete a payment with NUL evidence", method: "POST", path: "/api/tsq/processes/{process}/complete", body: `{"reason":"ok","stateOverrides":{"evidence":"\u0000"}}`, field: "stateOverrides.evidence"},
			{name: "complete a payment with evidence as a number", method: "POST", path: "/api/tsq/processes/{process}/complete", body: `{"reason":"ok","stateOverrides":{"evidence":5}}`, field: "stateOverrides.evidence"},
			{name: "complete with a NUL override key", method: "POST", path: "/api/tsq/processes/{process}/complete", body: `{"reason":"ok","stateOverrides":{"\u0000":"x","evidence":"ok"}}`, field: "stateOverrides"},
			{name: "complete with overrides not an object", method: "POST", path: "/api/tsq/processes/{process}/complete", body: `{"reason":"ok","stateOverrides":"evidence"}`, field: "stateOverrides"},
			{name: "complete with runCompensations", method: "POST", path: "/api/tsq/processes/{process}/complete", body: `{"reason":"ok","runCompensations":true}`, field: "runCompensations"},
			{name: "retry a process with a step", method: "POST", path: "/api/tsq/processes/{process}/retry", body: `{"reason":"ok","step":"x"}`, field: "step"},
			{name: "retry a process without reason", method: "POST", path: "/api/tsq/processes/{process}/retry", body: ``, field: "reason"},
			{name: "cancel with runCompensations as a string", method: "POST", path: "/api/tsq/processes/{process}/cancel", body: `{"reason":"ok","runCompensations":"yes"}`, field: "runCompensations"},
			{name: "skip without a step", method: "POST", path: "/api/tsq/processes/{process}/skip", body: `{"reason":"ok"}`, field: "step"},
			{name: "skip with NUL in the step", method: "POST", path: "/api/tsq/processes/{process}/skip", body: `{"reason":"ok","step":"\u0000"}`, field: "step"},
			{name: "skip another step", method: "POST", path: "/api/tsq/processes/{process}/skip", body: `{"reason":"ok","step":"STEP_SUBMIT_PAYMENT"}`, field: "step"},
			{name: "skip with NUL in the result", method: "POST", path: "/api/tsq/processes/{process}/skip", body: `{"reason":"ok","step":"STEP_CHECK_BALANCE","result":["\u0000"]}`, field: "result.0"},
			{name: "unknown process action", method: "POST", path: "/api/tsq/processes/{process}/resurrect", body: `{"reason":"ok"}`, status: 404, code: "NOT_FOUND", undocumented: true},
			{name: "process id not a UUID", method: "POST", path: "/api/tsq/processes/abc/retry", body: `{"reason":"ok"}`, field: "id"},
			{name: "retry an unknown process", method: "POST", path: "/api/tsq/processes/" + uuid.NewString() + "/retry", body: `{"reason":"ok"}`, status: 404, code: "NOT_FOUND"},
			{name: "get a process with a bad id", method: "GET", path: "/api/processes/abc", field: "id"},
			{name: "process query parameter", method: "GET", path: "/api/processes/{execution}?log=0", field: "log"},
			{name: "queues query parameter", method: "GET", path: "/api/queues?domain=fx", field: "domain"},
			{name: "openapi query parameter", method: "GET", path: "/api/openapi.json?format=yaml", field: "format"},

			{name: "no token", method: "POST", path: "/api/payments", body: validJSON, headers: map[string]string{"Authorization": ""}, status: 401, code: "UNAUTHENTICATED"},
			{name: "unknown token", method: "POST", path: "/api/payments", body: validJSON, headers: bearer("not-a-token-of-ours-at-all"), status: 401, code: "UNAUTHENTICATED"},
			{name: "basic scheme", method: "POST", path: "/api/payments", body: validJSON, headers: map[string]string{"Authorization": "Basic " + operatorToken}, status: 401, code: "UNAUTHENTICATED"},
			{name: "viewer submits", method: "POST", path: "/api/payments", body: validJSON, headers: bearer(viewerToken), status: 403, code: "FORBIDDEN"},
			{name: "viewer approves", method: "POST", path: "/api/approvals/{approval}/approve", body: `{"reason":"ok"}`, headers: bearer(viewerToken), status: 403, code: "FORBIDDEN"},
			{name: "unknown method", method: "DELETE", path: "/api/payments/{payment}", status: 405, code: "METHOD_NOT_ALLOWED", undocumented: true},
			{name: "PUT on a list", method: "PUT", path: "/api/payments", body: validJSON, status: 405, code: "METHOD_NOT_ALLOWED", undocumented: true},
			{name: "GET on an action", method: "GET", path: "/api/tsq/commands/{command}/retry", status: 405, code: "METHOD_NOT_ALLOWED", undocumented: true},
			{name: "unknown route", method: "GET", path: "/api/refunds", status: 404, code: "NOT_FOUND", undocumented: true},
			{name: "POST to an unknown route", method: "POST", path: "/api/refunds", body: validJSON, status: 404, code: "NOT_FOUND", undocumented: true},
		}

		// Headers every case sends unless it says otherwise.
		base := bearer(operatorToken)
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				if tc.status == 0 {
					tc.status = http.StatusBadRequest
				}
				headers := map[string]string{}
				for k, v := range base {
					headers[k] = v
				}
				for k, v := range tc.headers {
					headers[k] = v
				}
				var body []byte
				if tc.body != "" {
					body = []byte(tc.body)
				}
				before := takeSnapshot(t, f, db, prefix, command.ID, parked.ExecutionID)
				x := send(t, tc.method, f.HTTP.URL+ids.Replace(tc.path), body, headers)
				require.Equal(t, tc.status, x.resp.StatusCode, "%s", x.respBody)
				require.Equal(t, "application/problem+json", x.resp.Header.Get("Content-Type"))
				var p Problem
				require.NoError(t, json.Unmarshal(x.respBody, &p), "%s", x.respBody)
				require.Equal(t, tc.status, p.Status)
				if tc.field != "" {
					require.Equal(t, "VALIDATION_FAILED", p.Code, "%s", x.respBody)
					var fields []string
					for _, e := range p.Errors {
						fields = append(fields, e.Field)
					}
					require.Contains(t, fields, tc.field, "%s", x.respBody)
				} else {
					require.Equal(t, tc.code, p.Code, "%s", x.respBody)
					require.NotEmpty(t, p.Detail, "the problem says what is wrong")
				}
				require.Less(t, len(x.respBody), 4000, "the problem echoes no oversized input: %.300s", x.respBody)
				if tc.undocumented {
					require.False(t, doc.checkResponse(t, x), "the document has no such operation")
				} else {
					require.True(t, doc.checkResponse(t, x), "the route is documented")
				}
				require.Equal(t, before, takeSnapshot(t, f, db, prefix, command.ID, parked.ExecutionID), "a refused request changes nothing")
			})
		}
		require.GreaterOrEqual(t, len(cases), 150, fmt.Sprintf("%d bad requests", len(cases)))
	})
}
