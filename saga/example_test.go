package saga_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/driver/sqlitedriver"
	"github.com/commandbus/commandbus/migrate"
	"github.com/commandbus/commandbus/orchestration"
	"github.com/commandbus/commandbus/saga"
)

// A transfer saga whose credit is refused: the debit is compensated and the saga ends
// COMPENSATED, on the embedded SQLite driver.
func ExampleRegister() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "saga-example-")
	defer os.RemoveAll(dir)
	drv, err := sqlitedriver.Open(filepath.Join(dir, "example.db"), nil)
	if err != nil {
		panic(err)
	}
	defer drv.Close()
	if _, err := migrate.New(drv, nil).Up(ctx); err != nil {
		panic(err)
	}
	client, _ := commandbus.NewClient(drv, &commandbus.Config{Logger: slog.New(slog.DiscardHandler)})
	rt, _ := orchestration.New(client, orchestration.Config{})

	def := saga.New("transfer", 1).
		Step("debit", func(ctx context.Context, sc *saga.StepContext) (any, error) {
			return map[string]int{"debited": 100}, nil
		}, saga.Compensate(func(ctx context.Context, sc *saga.StepContext) error {
			fmt.Println("refunding the debit")
			return nil
		})).
		Step("credit", func(ctx context.Context, sc *saga.StepContext) (any, error) {
			return nil, commandbus.BusinessRule("ACCOUNT_CLOSED", "the payee's account is closed")
		}, saga.DependsOn("debit"))
	transfers, err := saga.Register(rt, def)
	if err != nil {
		panic(err)
	}
	if err := client.Start(ctx); err != nil {
		panic(err)
	}
	defer client.Stop(ctx)

	id, _ := transfers.Start(ctx, map[string]int{"amount": 100})
	for {
		r, _ := transfers.Result(ctx, id)
		if r.Status == string(driver.ExecutionCompensated) {
			fmt.Println(r.Status, r.FirstErrorStep, r.ErrorCode, r.CompensatedSteps)
			return
		}
		time.Sleep(10 * time.Millisecond) // polling the stored status
	}
	// Output:
	// refunding the debit
	// COMPENSATED credit ACCOUNT_CLOSED [debit]
}
