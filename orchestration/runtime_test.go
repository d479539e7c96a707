package orchestration_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/dbtest"
	"github.com/commandbus/commandbus/orchestration"
	"github.com/commandbus/commandbus/process"
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
