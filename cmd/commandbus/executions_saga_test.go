package main

import (
	"encoding/json"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus/driver"
)

// The binary carries the fulfilment saga: an operator starts and finds one from the command line.
func TestSagaFromTheCommandLine(t *testing.T) {
	t.Parallel()
	db := "sqlite://" + filepath.Join(t.TempDir(), "x.db")
	run(t, "migrate", "up", "--database", db)
	out := run(t, "executions", "start", "saga", "OrderFulfilment", "--database", db, "--business-key", "o-7",
		"--input", `{"id":"o-7","address":"1 Main St","items":[{"sku":"MUG","quantity":1,"price":800}]}`)
	id := regexp.MustCompile(`started saga OrderFulfilment: (\S+)`).FindStringSubmatch(out)
	require.Len(t, id, 2, out)
	var rows []*driver.ExecutionRow
	require.NoError(t, json.Unmarshal([]byte(run(t, "executions", "list", "--model", "saga", "--json", "--database", db)), &rows))
	require.Len(t, rows, 1)
	require.Equal(t, id[1], rows[0].ID.String())
	require.Equal(t, "o-7", rows[0].BusinessKey)
}

// executions show gives a saga's result: its steps' outcomes and the compensations.
func TestSagaResultFromTheCommandLine(t *testing.T) {
	t.Parallel()
	db := "sqlite://" + filepath.Join(t.TempDir(), "x.db")
	run(t, "migrate", "up", "--database", db)
	out := run(t, "executions", "start", "saga", "OrderFulfilment", "--database", db,
		"--input", `{"id":"o-8","address":"Atlantis","items":[{"sku":"MUG","quantity":1,"price":800}]}`)
	id := regexp.MustCompile(`started saga OrderFulfilment: (\S+)`).FindStringSubmatch(out)
	require.Len(t, id, 2, out)
	var inst struct {
		Status string `json:"status"`
		Result struct {
			Order []string `json:"order"`
		} `json:"result"`
	}
	require.NoError(t, json.Unmarshal([]byte(run(t, "executions", "show", id[1], "--json", "--database", db)), &inst))
	require.Equal(t, "PENDING", inst.Status)
	require.Equal(t, []string{"reserve:MUG", "charge", "ship"}, inst.Result.Order, "the saga's steps, expanded")
	require.Contains(t, run(t, "executions", "show", id[1], "--database", db), "result:")
}
