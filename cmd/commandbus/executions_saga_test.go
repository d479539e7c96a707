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
