package process_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver/sqlitedriver"
	"github.com/commandbus/commandbus/migrate"
	"github.com/commandbus/commandbus/orchestration"
	"github.com/commandbus/commandbus/process"
)

type greeting struct {
	Name     string `json:"name"`
	Greeting string `json:"greeting,omitempty"`
	Approved bool   `json:"approved"`
}

type approved struct{}

func (approved) ResponseName() string { return "Approved" }

type greetingProcess struct{}

func (greetingProcess) Type() string   { return "Greeting" }
func (greetingProcess) Domain() string { return "greetings" }

func (greetingProcess) Execute(x *process.Execution[greeting]) error {
	text, err := process.Step(x, "compose", func(ctx context.Context) (string, error) {
		return "Hello, " + x.State.Name, nil
	})
	if err != nil {
		return err
	}
	x.State.Greeting = text
	return x.Wait("awaitApproval", func() bool { return x.State.Approved }, time.Hour)
}

// A process runs until it must wait, and resumes when its response arrives.
func ExampleManager() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	drv, _ := sqlitedriver.Open(filepath.Join(dir, "example.db"), nil)
	defer drv.Close()
	_, _ = migrate.New(drv, nil).Up(ctx)

	client, _ := commandbus.NewClient(drv, &commandbus.Config{Logger: slog.New(slog.DiscardHandler)})
	rt, _ := orchestration.New(client, orchestration.Config{})
	m, _ := process.NewManager(rt, process.Process[greeting](greetingProcess{}))
	process.OnResponse(m, func(s *greeting, _ approved) error { s.Approved = true; return nil })

	id, _ := m.Start(ctx, greeting{Name: "Ada"})
	inst, _ := m.Get(ctx, id)
	fmt.Println(inst.Status, inst.CurrentWait, inst.State.Greeting)

	_ = m.ProcessAsyncResponse(ctx, id, approved{})
	inst, _ = m.Get(ctx, id)
	fmt.Println(inst.Status)
	// Output:
	// WAITING_FOR_ASYNC awaitApproval Hello, Ada
	// COMPLETED
}
