package pgdriver

import (
	"context"
	"fmt"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/commandbus/commandbus/driver"
)

// attributeArrays holds attributes to write as parallel arrays for unnest, tagged with the fence
// of the checkpoint that writes them (0 at insert).
type attributeArrays struct {
	executionIDs []pgtype.UUID
	fences       []int64
	keys, values []string
}

// add validates attrs and appends them for execution id.
func (a *attributeArrays) add(id uuid.UUID, fence int64, attrs map[string]string) error {
	if len(attrs) == 0 {
		return nil
	}
	if err := driver.ValidateAttributes(attrs); err != nil {
		return fmt.Errorf("execution %s: %w", id, err)
	}
	keys, values := driver.SortedAttributes(attrs)
	for i := range keys {
		a.executionIDs = append(a.executionIDs, pgUUID(id))
		a.fences = append(a.fences, fence)
		a.keys = append(a.keys, keys[i])
		a.values = append(a.values, values[i])
	}
	return nil
}

func (a *attributeArrays) empty() bool { return len(a.keys) == 0 }

// insertCTE is the CTE storing the attributes of new executions (those the ins CTE inserted: an
// id that existed keeps its attributes) from parameter $first on, and its arguments; nothing
// when there are none. Empty values are not stored.
func (a *attributeArrays) insertCTE(first int) (string, []any) {
	if a.empty() {
		return "", nil
	}
	return fmt.Sprintf(`, attributes AS (
			INSERT INTO {schema}.execution_attribute (execution_id, key, value)
			SELECT a.execution_id, a.key, a.value
			FROM unnest($%d::uuid[], $%d::text[], $%d::text[]) AS a(execution_id, key, value)
			WHERE a.value <> '' AND a.execution_id IN (SELECT id FROM ins)
		)`, first, first+1, first+2), []any{a.executionIDs, a.keys, a.values}
}

// checkpointCTE is the CTEs writing the attributes of the checkpoints that applied (the applied
// CTE of executionCheckpointSQL) from parameter $first on, and their arguments; nothing when
// there are none. A value upserts its key; an empty value deletes it.
func (a *attributeArrays) checkpointCTE(first int) (string, []any) {
	if a.empty() {
		return "", nil
	}
	input := fmt.Sprintf(`unnest($%d::uuid[], $%d::bigint[], $%d::text[], $%d::text[]) AS a(execution_id, fence, key, value)`,
		first, first+1, first+2, first+3)
	return `, attributes_set AS (
			INSERT INTO {schema}.execution_attribute (execution_id, key, value)
			SELECT a.execution_id, a.key, a.value FROM ` + input + `
			WHERE a.value <> '' AND (a.execution_id, a.fence) IN (SELECT id, fence FROM applied)
			ON CONFLICT (execution_id, key) DO UPDATE SET value = excluded.value
		), attributes_unset AS (
			DELETE FROM {schema}.execution_attribute t USING ` + input + `
			WHERE t.execution_id = a.execution_id AND t.key = a.key AND a.value = ''
				AND (a.execution_id, a.fence) IN (SELECT id, fence FROM applied)
		)`, []any{a.executionIDs, a.fences, a.keys, a.values}
}

// attributesMatch keeps executions having every attribute of attrs.
func attributesMatch(f *filter, attrs map[string]string) {
	keys, values := driver.SortedAttributes(attrs)
	for i := range keys {
		f.cond("id IN (SELECT execution_id FROM {schema}.execution_attribute WHERE key = " +
			f.arg(keys[i]) + " AND value = " + f.arg(values[i]) + ")")
	}
}

func (e *executor) ExecutionAttributes(ctx context.Context, id uuid.UUID) (map[string]string, error) {
	rows, err := e.db.Query(ctx, e.d.sql(`SELECT key, value FROM {schema}.execution_attribute WHERE execution_id = $1`), pgUUID(id))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			return nil, err
		}
		out[k] = v
	}
	return out, rows.Err()
}

// executionOwnedTables are the tables whose rows belong to one execution (by execution_id) and
// are deleted with it. A table keyed by execution_id that a feature adds belongs here.
var executionOwnedTables = []string{"execution_log", "execution_response", "execution_attribute",
	"execution_signal", "execution_timer", "execution_wait"}

// executionDeleteExpiredSQL deletes one batch of ended executions and their rows in one short
// statement. SKIP LOCKED: a row some transaction holds is left for the next batch, so retention
// never waits on, nor holds up, the pollers and runners.
var executionDeleteExpiredSQL = func() string {
	var b strings.Builder
	b.WriteString(`
		WITH picked AS (
			SELECT id FROM {schema}.execution
			WHERE completed_at < $1 AND status IN ('COMPLETED', 'COMPENSATED', 'CANCELLED', 'FAILED')
			ORDER BY completed_at
			LIMIT $2
			FOR UPDATE SKIP LOCKED
		)`)
	for i, table := range executionOwnedTables {
		fmt.Fprintf(&b, `, owned_%d AS (
			DELETE FROM {schema}.%s WHERE execution_id IN (SELECT id FROM picked)
		)`, i, table)
	}
	b.WriteString(`, deleted AS (
			DELETE FROM {schema}.execution WHERE id IN (SELECT id FROM picked) RETURNING 1
		)
		SELECT count(*) FROM deleted`)
	return b.String()
}()

func (e *executor) ExecutionDeleteExpired(ctx context.Context, params *driver.ExecutionDeleteExpiredParams) (int, error) {
	if params.Before.IsZero() {
		return 0, fmt.Errorf("ExecutionDeleteExpired: Before is required")
	}
	var n int
	err := e.db.QueryRow(ctx, e.d.sql(executionDeleteExpiredSQL), params.Before, params.BatchLimit()).Scan(&n)
	return n, err
}
