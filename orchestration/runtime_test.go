package orchestration_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/dbtest"
	"github.com/commandbus/commandbus/orchestration"
	"github.com/commandbus/commandbus/process"
	"github.com/commandbus/commandbus/workflow"
)

type greeting struct{ Name string }

type greeter struct{ typ string }

func (g greeter) Type() string   { return g.typ }
func (g greeter) Domain() string { return "greetings" }
func (g greeter) Execute(x *process.Execution[greeting]) error {
	_, err := process.Step(x, "greet", func(ctx context.Context) (string, error) { return "hello " + x.State.Name, nil })
	return err
}

func newClient(t *testing.T, drv driver.Driver) *commandbus.Client {
	t.Helper()
	client, err := commandbus.NewClient(drv, &commandbus.Config{Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	return client
}

func TestRuntime(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		t.Run("OnePerClient", func(t *testing.T) {
			client := newClient(t, drv)
			_, err := orchestration.New(client, orchestration.Config{})
			require.NoError(t, err)
			_, err = orchestration.New(client, orchestration.Config{})
			require.ErrorContains(t, err, "already has a runtime")
		})

		t.Run("RejectsBadConfig", func(t *testing.T) {
			_, err := orchestration.New(newClient(t, drv), orchestration.Config{ExecutionLease: -time.Second})
			var verr *commandbus.ValidationError
			require.ErrorAs(t, err, &verr)
			_, err = orchestration.New(nil, orchestration.Config{})
			require.Error(t, err)
		})

		t.Run("RegistryByModelAndType", func(t *testing.T) {
			client := newClient(t, drv)
			rt, err := orchestration.New(client, orchestration.Config{})
			require.NoError(t, err)
			b, err := process.NewManager(rt, process.Process[greeting](greeter{typ: "b-greeting"}))
			require.NoError(t, err)
			a, err := process.NewManager(rt, process.Process[greeting](greeter{typ: "a-greeting"}))
			require.NoError(t, err)

			_, err = process.NewManager(rt, process.Process[greeting](greeter{typ: "a-greeting"}))
			require.ErrorContains(t, err, `execution type "a-greeting" is already registered`)

			require.Same(t, a, rt.Operations(process.Model, "a-greeting"))
			require.Nil(t, rt.Operations("workflow", "a-greeting"), "the same type under another model is not it")
			require.Nil(t, rt.Operations(process.Model, "missing"))
			all := rt.All()
			require.Len(t, all, 2)
			require.Equal(t, []string{"a-greeting", "b-greeting"}, []string{all[0].Type(), all[1].Type()})
			require.Same(t, b, all[1])

			id, err := a.Start(context.Background(), greeting{Name: "Ada"})
			require.NoError(t, err)
			row, err := drv.Executor().ExecutionGet(context.Background(), id)
			require.NoError(t, err)
			require.Equal(t, driver.ExecutionCompleted, row.Status)
			require.Same(t, a, rt.OperationsFor(row), "a stored execution finds its operations by model and type")
		})

		t.Run("RefusesAfterStart", func(t *testing.T) {
			client := newClient(t, drv)
			rt, err := orchestration.New(client, orchestration.Config{})
			require.NoError(t, err)
			require.NoError(t, client.Start(context.Background()))
			t.Cleanup(func() { _ = client.Stop(context.Background()) })
			_, err = process.NewManager(rt, process.Process[greeting](greeter{typ: "late"}))
			require.ErrorContains(t, err, "before starting the client")
			_, err = orchestration.New(newClient(t, drv), orchestration.Config{})
			require.NoError(t, err, "another client gets its own runtime")
		})
	})
}

// Every model is described and started from JSON through the runtime, as the REST API and the
// CLI do it.
func TestDescribeAndStartJSON(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		client := newClient(t, drv)
		rt, err := orchestration.New(client, orchestration.Config{})
		require.NoError(t, err)
		_, err = process.NewManager(rt, process.Process[greeting](greeter{typ: "greeting"}))
		require.NoError(t, err)
		noop := func(context.Context, *workflow.StepContext) (any, error) { return nil, nil }
		_, err = workflow.Register(rt, workflow.New("onboarding", 2).Describe("opens an account").
			Step("verify", noop).Step("open", noop, workflow.DependsOn("verify")))
		require.NoError(t, err)

		proc := orchestration.Describe(rt.Operations(process.Model, "greeting"))
		require.Equal(t, orchestration.Definition{Model: "process", Type: "greeting", Domain: "greetings"}, proc)
		wf := orchestration.Describe(rt.Operations(workflow.Model, "onboarding"))
		require.Equal(t, 2, wf.Version)
		require.Equal(t, "opens an account", wf.Description)
		require.Equal(t, [][]string{{"verify"}, {"open"}}, wf.Topology.Layers)

		starter := rt.Operations(process.Model, "greeting").(orchestration.Starter)
		id, err := starter.StartJSON(ctx, orchestration.StartRequest{Input: json.RawMessage(`{"Name":"Ada"}`), BusinessKey: "c-1"})
		require.NoError(t, err)
		row, err := drv.Executor().ExecutionGet(ctx, id)
		require.NoError(t, err)
		require.Equal(t, "c-1", row.BusinessKey)
		require.JSONEq(t, `{"Name":"Ada"}`, string(row.State))

		var verr *commandbus.ValidationError
		_, err = starter.StartJSON(ctx, orchestration.StartRequest{Input: json.RawMessage(`{"Nmae":"Ada"}`)})
		require.ErrorAs(t, err, &verr, "an unknown field is refused")
		require.Equal(t, "input", verr.Field)
		_, err = starter.StartJSON(ctx, orchestration.StartRequest{DryRun: true})
		require.ErrorAs(t, err, &verr)
		require.Equal(t, "dryRun", verr.Field)

		wstarter := rt.Operations(workflow.Model, "onboarding").(orchestration.Starter)
		_, err = wstarter.StartJSON(ctx, orchestration.StartRequest{Input: json.RawMessage(`{`)})
		require.ErrorAs(t, err, &verr)
		wid, err := wstarter.StartJSON(ctx, orchestration.StartRequest{Input: json.RawMessage(`{"email":"ada@example.com"}`), DryRun: true})
		require.NoError(t, err)
		again, err := wstarter.StartJSON(ctx, orchestration.StartRequest{ID: wid})
		require.NoError(t, err, "a start with an existing id is a no-op")
		require.Equal(t, wid, again)
	})
}
