package tcc_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver/sqlitedriver"
	"github.com/commandbus/commandbus/migrate"
	"github.com/commandbus/commandbus/orchestration"
	"github.com/commandbus/commandbus/tcc"
)

// A transfer holds the amount at the debtor, prepares the credit, then confirms both (at once);
// when the credit cannot be prepared, the hold is released.
func ExampleManager() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	drv, _ := sqlitedriver.Open(filepath.Join(dir, "example.db"), nil)
	defer drv.Close()
	_, _ = migrate.New(drv, nil).Up(ctx)

	client, _ := commandbus.NewClient(drv, &commandbus.Config{Logger: slog.New(slog.DiscardHandler)})
	rt, _ := orchestration.New(client, orchestration.Config{})

	type transfer struct {
		Amount int    `json:"amount"`
		To     string `json:"to"`
	}
	hold := func(ctx context.Context, c *tcc.Context) (any, error) { return "HOLD-1", nil }
	commit := func(ctx context.Context, c *tcc.Context) error { return nil }
	release := func(ctx context.Context, c *tcc.Context) error {
		var id string
		_ = c.DecodeTryResult(&id)
		fmt.Println("release", id)
		return nil
	}
	prepare := func(ctx context.Context, c *tcc.Context) (any, error) {
		var t transfer
		_ = c.DecodeInput(&t)
		if t.To == "closed" {
			return nil, commandbus.BusinessRule("ACCOUNT_CLOSED", "the creditor's account is closed")
		}
		return "CREDIT-1", nil
	}
	credit := func(ctx context.Context, c *tcc.Context) error { return nil }
	undo := func(ctx context.Context, c *tcc.Context) error { return nil }

	m, _ := tcc.Register(rt, tcc.New("Transfer", 1).
		Participant("debit", hold, commit, release).
		Participant("credit", prepare, credit, undo))

	id, _ := m.Start(ctx, transfer{Amount: 100, To: "open"}, tcc.Immediate())
	res, _ := m.Result(ctx, id)
	var holdID string
	_ = res.DecodeTryResult("debit", &holdID)
	fmt.Println(res.Status, holdID, res.Participant("credit").Confirm.Status)

	id, _ = m.Start(ctx, transfer{Amount: 100, To: "closed"}, tcc.Immediate())
	res, _ = m.Result(ctx, id)
	fmt.Println(res.Status, res.FailedPhase, res.FailedParticipant, res.ErrorCode)
	// Output:
	// CONFIRMED HOLD-1 COMPLETED
	// release HOLD-1
	// CANCELED TRY credit ACCOUNT_CLOSED
}
