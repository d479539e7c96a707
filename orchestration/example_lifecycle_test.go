package orchestration_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver/sqlitedriver"
	"github.com/commandbus/commandbus/migrate"
	"github.com/commandbus/commandbus/orchestration"
	"github.com/commandbus/commandbus/workflow"
)

// A listener receives every lifecycle event after its commit; a callback runs when a workflow of
// its definition completes.
func ExampleRuntime_OnLifecycle() {
	dir, err := os.MkdirTemp("", "commandbus-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	drv, err := sqlitedriver.Open(filepath.Join(dir, "app.db"), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer drv.Close()
	ctx := context.Background()
	if _, err := migrate.New(drv, nil).Up(ctx); err != nil {
		log.Fatal(err)
	}
	client, err := commandbus.NewClient(drv, &commandbus.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		log.Fatal(err)
	}
	rt, err := orchestration.New(client, orchestration.Config{})
	if err != nil {
		log.Fatal(err)
	}
	events := make(chan orchestration.LifecycleEvent, 16)
	if err := rt.OnLifecycle(func(_ context.Context, ev orchestration.LifecycleEvent) error {
		events <- ev
		return nil
	}); err != nil {
		log.Fatal(err)
	}
	done := make(chan string, 1)
	if err := rt.AddCallbacks(workflow.Model, "greet", orchestration.Callbacks{
		OnComplete: []orchestration.Callback{{Func: func(_ context.Context, ev orchestration.LifecycleEvent) error {
			done <- "greet completed: " + fmt.Sprint(ev.Success)
			return nil
		}}},
	}); err != nil {
		log.Fatal(err)
	}
	hello := func(context.Context, *workflow.StepContext) (any, error) { return "hello", nil }
	greet, err := workflow.Register(rt, workflow.New("greet", 1).Step("hello", hello))
	if err != nil {
		log.Fatal(err)
	}
	if err := client.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer func() { _ = client.Stop(context.Background()) }()
	if _, err := greet.Start(ctx, nil, workflow.Immediate()); err != nil {
		log.Fatal(err)
	}
	timeout := time.After(30 * time.Second)
	for completed := false; !completed; {
		select {
		case ev := <-events:
			if ev.StepID != "" {
				fmt.Println(ev.Type, ev.StepID)
			} else {
				fmt.Println(ev.Type)
			}
			completed = ev.Type == "EXECUTION_COMPLETED"
		case <-timeout:
			log.Fatal("no completion event")
		}
	}
	select {
	case msg := <-done:
		fmt.Println(msg)
	case <-timeout:
		log.Fatal("no completion callback")
	}
	// Output:
	// EXECUTION_STARTED
	// STEP_STARTED hello
	// STEP_SUCCEEDED hello
	// EXECUTION_COMPLETED
	// greet completed: true
}
