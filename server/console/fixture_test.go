package console_test

import (
	"context"
	"html"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/examples/payments"
	"github.com/commandbus/commandbus/internal/servertest"
	. "github.com/commandbus/commandbus/server"
	"github.com/commandbus/commandbus/server/console"
)

const (
	operatorToken = "operator-token-0123456789"
	viewerToken   = "viewer-token-0123456789ab"
)

var testTokens = []console.Token{
	{Subject: "alice@ops", Token: operatorToken, Role: RoleOperator},
	{Subject: "victor@audit", Token: viewerToken, Role: RoleViewer},
}

// consoleFixture is the shared fixture (servertest.Fixture) with the console's own helpers.
type consoleFixture struct{ *servertest.Fixture }

func setupConsole(t *testing.T, drv driver.Driver) *consoleFixture {
	t.Helper()
	return &consoleFixture{servertest.Setup(t, drv, servertest.Options{Tokens: testTokens})}
}

// parkRiskCommands makes n step-process payments whose BookRisk commands fail permanently: the
// commands wait in the command TSQ and the payments wait for their replies.
func (f *consoleFixture) parkRiskCommands(n int) (pays []*payments.PaymentResult, cmds []*commandbus.CommandRow) {
	f.T.Helper()
	require.NoError(f.T, f.Platform.InjectFault(payments.Fault{Step: payments.StepBookRisk, Class: payments.FaultPermanent, Times: n}))
	for range n {
		pays = append(pays, f.Submit(servertest.DomesticPayment(payments.TypePaymentStep)))
	}
	for _, p := range pays {
		var cmd *commandbus.CommandRow
		servertest.Eventually(f.T, 30*time.Second, "BookRisk to park in the command TSQ", func() bool {
			list, err := f.Client.ListCommands(context.Background(), &commandbus.ListParams{CorrelationID: p.ExecutionID,
				Statuses: []commandbus.Status{commandbus.StatusInTSQ}})
			require.NoError(f.T, err)
			if len(list) == 1 {
				cmd = list[0]
			}
			return cmd != nil
		})
		cmds = append(cmds, cmd)
	}
	return pays, cmds
}

// networkErrorPayment makes a step-process payment whose L1 confirmation comes back as a
// permanent network error: the payment parks in the process TSQ with NETWORK_ERROR after its
// risk booking and submission, which compensation must undo.
func (f *consoleFixture) networkErrorPayment() *payments.PaymentResult {
	f.T.Helper()
	req := servertest.DomesticPayment(payments.TypePaymentStep)
	req.Behavior = &payments.Behavior{Name: "L1 network error", Steps: map[string]payments.StepBehavior{payments.StepAwaitL1: {FailPermanentPct: 100}}}
	res := f.Submit(req)
	f.WaitPayment(res.PaymentID, "IN_TSQ")
	row, err := f.Client.Driver().Executor().ExecutionGet(context.Background(), res.ExecutionID)
	require.NoError(f.T, err)
	require.Equal(f.T, "NETWORK_ERROR", row.ErrorCode)
	return res
}

// execution reads an execution back from the database.
func (f *consoleFixture) execution(id uuid.UUID) *driver.ExecutionRow {
	f.T.Helper()
	row, err := f.Client.Driver().Executor().ExecutionGet(context.Background(), id)
	require.NoError(f.T, err)
	return row
}

// command reads a command back from the database.
func (f *consoleFixture) command(id uuid.UUID) *commandbus.CommandRow {
	f.T.Helper()
	row, err := f.Client.GetCommand(context.Background(), id)
	require.NoError(f.T, err)
	return row
}

// audit reads the audit log of one entity, newest first.
func (f *consoleFixture) audit(entityType string, id uuid.UUID) []*commandbus.AuditLogEntry {
	f.T.Helper()
	entries, err := f.Client.AuditLog(context.Background(), &driver.AuditLogListParams{EntityType: entityType, EntityID: id.String()})
	require.NoError(f.T, err)
	return entries
}

// requireCompensated checks in the database that a cancelled payment's process ran the
// compensations of what it did: the compensation of each named step succeeded in its log (the
// log names a compensation by its step) and its command, of the given type, completed.
func (f *consoleFixture) requireCompensated(execID uuid.UUID, compensations map[string]string) {
	f.T.Helper()
	ctx := context.Background()
	servertest.Eventually(f.T, 30*time.Second, "the compensations to finish", func() bool {
		return f.execution(execID).Status == driver.ExecutionCancelled
	})
	log, err := f.Client.Driver().Executor().ExecutionLogList(ctx, execID)
	require.NoError(f.T, err)
	succeeded := map[string]bool{}
	for _, e := range log {
		if e.EntryType == "COMPENSATION" && e.StepStatus == "COMPENSATION_SUCCESS" {
			succeeded[e.Name] = true
		}
	}
	cmds, err := f.Client.ListCommands(ctx, &commandbus.ListParams{CorrelationID: execID})
	require.NoError(f.T, err)
	completed := map[string]bool{}
	for _, c := range cmds {
		if c.Status == commandbus.StatusCompleted {
			completed[c.Type] = true
		}
	}
	for name, commandType := range compensations {
		require.True(f.T, succeeded[name], "compensation %s succeeded in the log (log: %v)", name, succeeded)
		require.True(f.T, completed[commandType], "the %s command completed", commandType)
	}
	require.NoError(f.T, f.Platform.CheckInvariants(ctx))
}

var (
	blockTagRE = regexp.MustCompile(`(?i)</?(td|th|tr|p|div|li|br|dt|dd|h[1-6]|section|table|ul|ol)\b[^>]*>`)
	tagRE      = regexp.MustCompile(`<[^>]*>`)
	spaceRE    = regexp.MustCompile(`\s+`)
)

// textOf is a page's text as a reader sees it: tags dropped (blocks apart), spaces collapsed,
// entities decoded.
func textOf(body string) string {
	text := tagRE.ReplaceAllString(blockTagRE.ReplaceAllString(body, " "), "")
	return strings.TrimSpace(spaceRE.ReplaceAllString(html.UnescapeString(text), " "))
}

// rowOf returns the table row whose opening tag has attr="value" (data-id, data-payment, …).
func rowOf(t testing.TB, body, attr, value string) string {
	t.Helper()
	start := strings.Index(body, attr+`="`+value+`"`)
	require.GreaterOrEqual(t, start, 0, "no row with %s=%s", attr, value)
	start = strings.LastIndex(body[:start], "<tr")
	end := strings.Index(body[start:], "</tr>")
	require.GreaterOrEqual(t, end, 0)
	return body[start : start+end]
}

// requireHTML fails unless a page holds want; on failure it shows the page's text, not its
// markup.
func requireHTML(t testing.TB, body, want string, msg ...any) {
	t.Helper()
	if !strings.Contains(body, want) {
		text := textOf(body)
		t.Fatalf("the page does not contain %q %v; its text: %s", want, msg, text[:min(len(text), 3000)])
	}
}

// requireNoHTML fails if a page holds unwanted.
func requireNoHTML(t testing.TB, body, unwanted string, msg ...any) {
	t.Helper()
	if strings.Contains(body, unwanted) {
		t.Fatalf("the page contains %q %v", unwanted, msg)
	}
}

// shortID is how the console shows an id.
func shortID(v any) string { return console.ExportShortID(v) }
