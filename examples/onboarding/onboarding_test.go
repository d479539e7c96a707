package onboarding_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/examples/onboarding"
	"github.com/commandbus/commandbus/internal/dbtest"
	"github.com/commandbus/commandbus/orchestration"
	"github.com/commandbus/commandbus/workflow"
)

func waitStatus(t *testing.T, f *onboarding.Flow, id uuid.UUID, want driver.ExecutionStatus) *workflow.Instance {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		inst, err := f.Get(context.Background(), id)
		require.NoError(t, err)
		if inst.Status == want {
			return inst
		}
		if time.Now().After(deadline) {
			t.Fatalf("execution %s is %s (%s %s), want %s", id, inst.Status, inst.ErrorCode, inst.ErrorMessage, want)
		}
		time.Sleep(20 * time.Millisecond) // polling the stored status with a deadline
	}
}

func stepStatus(inst *workflow.Instance) map[string]workflow.StepStatus {
	out := map[string]workflow.StepStatus{}
	for _, s := range inst.Steps {
		out[s.ID] = s
	}
	return out
}

func TestOnboarding(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		ms := func(n int) commandbus.Duration { return commandbus.Duration(time.Duration(n) * time.Millisecond) }
		client, err := commandbus.NewClient(drv, &commandbus.Config{
			Logger:  slog.New(slog.DiscardHandler),
			Process: commandbus.ProcessConfig{PendingPollInterval: ms(20), RetryPollInterval: ms(20)},
		})
		require.NoError(t, err)
		rt, err := orchestration.New(client, orchestration.Config{})
		require.NoError(t, err)
		flow, err := onboarding.Register(rt)
		require.NoError(t, err)
		require.NoError(t, client.Start(ctx))
		t.Cleanup(func() { _ = client.Stop(context.Background()) })
		require.Equal(t, [][]string{{"verifyApplicant"}, {"creditCheck", "kyc", "sanctions"}, {"openAccount"}, {"sendWelcomePack"}}, flow.Topology().Layers)

		happy, err := flow.Start(ctx, onboarding.Applicant{Name: "Ada Lovelace", Email: "ada@example.com", Country: "GB", CreditLimit: 5000})
		require.NoError(t, err)
		busy, err := flow.Start(ctx, onboarding.Applicant{Name: "Busy Bee", Email: "bee@example.com", Country: "FR"})
		require.NoError(t, err)
		sanctioned, err := flow.Start(ctx, onboarding.Applicant{Name: "Eve", Email: "eve@example.com", Country: "XS"})
		require.NoError(t, err)
		bounced, err := flow.Start(ctx, onboarding.Applicant{Name: "Bob", Email: "bob@bounce.example", Country: "DE"})
		require.NoError(t, err)

		st := stepStatus(waitStatus(t, flow, happy, driver.ExecutionCompleted))
		require.Equal(t, "COMPLETED", st["creditCheck"].Status)
		require.JSONEq(t, `{"approvedLimit":5000}`, string(st["creditCheck"].Result))

		st = stepStatus(waitStatus(t, flow, busy, driver.ExecutionCompleted))
		require.Equal(t, 3, st["kyc"].Attempts, "the busy KYC provider was retried twice")
		require.Equal(t, "SKIPPED", st["creditCheck"].Status, "no credit asked, no credit check")

		inst := waitStatus(t, flow, sanctioned, driver.ExecutionCompensated)
		require.Equal(t, "SANCTIONED_COUNTRY", inst.ErrorCode)
		require.Equal(t, "PENDING", stepStatus(inst)["openAccount"].Status, "no account is opened")
		require.Contains(t, flow.Closed, "KYC-"+sanctioned.String()[:8], "the KYC file was discarded")

		inst = waitStatus(t, flow, bounced, driver.ExecutionWaitingForTSQ)
		require.Equal(t, "MAILBOX_UNKNOWN", inst.ErrorCode)
		require.NoError(t, flow.Skip(ctx, bounced, "sendWelcomePack", nil, commandbus.OperatorAction{Actor: "ops:ada", Reason: "welcome pack posted by hand"}))
		waitStatus(t, flow, bounced, driver.ExecutionCompleted)

		// An ApplicationSubmitted event starts an onboarding with the applicant as input, once.
		event := []byte(`{"id":"app-7","type":"ApplicationSubmitted","source":"branch-portal",` +
			`"data":{"name":"Grace Hopper","email":"grace@example.com","country":"US"}}`)
		receipt, err := rt.ReceiveEvent(ctx, orchestration.EventTransportHTTP, event)
		require.NoError(t, err)
		require.Equal(t, orchestration.EventStarted, receipt.Outcome)
		again, err := rt.ReceiveEvent(ctx, orchestration.EventTransportHTTP, event)
		require.NoError(t, err)
		require.Equal(t, orchestration.EventDuplicate, again.Outcome)
		inst = waitStatus(t, flow, receipt.Executions[0].ID, driver.ExecutionCompleted)
		require.Equal(t, "SKIPPED", stepStatus(inst)["creditCheck"].Status)
		started, err := flow.List(ctx, workflow.ListParams{Attributes: map[string]string{"event.id": "app-7"}})
		require.NoError(t, err)
		require.Len(t, started, 1, "the redelivered event started nothing new")
	})
}
