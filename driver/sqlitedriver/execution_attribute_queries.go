package sqlitedriver

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	"github.com/google/uuid"

	"github.com/commandbus/commandbus/driver"
)

// writeExecutionAttributes upserts the attributes of one execution in tx; an empty value deletes
// its key.
func (e *executor) writeExecutionAttributes(ctx context.Context, tx *sql.Tx, id uuid.UUID, attrs map[string]string) error {
	if len(attrs) == 0 {
		return nil
	}
	if err := driver.ValidateAttributes(attrs); err != nil {
		return fmt.Errorf("execution %s: %w", id, err)
	}
	keys, values := driver.SortedAttributes(attrs)
	for i, key := range keys {
		var err error
		if values[i] == "" {
			_, err = tx.ExecContext(ctx, e.d.sql(`DELETE FROM {schema}.execution_attribute WHERE execution_id = ? AND key = ?`), id.String(), key)
		} else {
			_, err = tx.ExecContext(ctx, e.d.sql(`
				INSERT INTO {schema}.execution_attribute (execution_id, key, value) VALUES (?, ?, ?)
				ON CONFLICT (execution_id, key) DO UPDATE SET value = excluded.value`), id.String(), key, values[i])
		}
		if err != nil {
			return fmt.Errorf("writing attribute %q of execution %s: %w", key, id, err)
		}
	}
	return nil
}

// attributesMatch keeps executions having every attribute of attrs.
func attributesMatch(f *filter, attrs map[string]string) {
	keys, values := driver.SortedAttributes(attrs)
	for i := range keys {
		f.cond("id IN (SELECT execution_id FROM {schema}.execution_attribute WHERE key = ? AND value = ?)", keys[i], values[i])
	}
}

func (e *executor) ExecutionAttributes(ctx context.Context, id uuid.UUID) (map[string]string, error) {
	rows, err := e.read.QueryContext(ctx, e.d.sql(`SELECT key, value FROM {schema}.execution_attribute WHERE execution_id = ?`), id.String())
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

// ExecutionDeleteExpired picks one batch of ended executions, then deletes their rows and them
// in the same transaction; the single writer connection keeps it as isolated as PostgreSQL's one
// statement.
func (e *executor) ExecutionDeleteExpired(ctx context.Context, params *driver.ExecutionDeleteExpiredParams) (int, error) {
	if params.Before.IsZero() {
		return 0, fmt.Errorf("ExecutionDeleteExpired: Before is required")
	}
	var deleted int
	err := e.inTx(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, e.d.sql(`
			SELECT id FROM {schema}.execution
			WHERE completed_at < ? AND status IN ('COMPLETED', 'COMPENSATED', 'CANCELLED', 'FAILED')
			ORDER BY completed_at LIMIT ?`), micros(params.Before), params.BatchLimit())
		if err != nil {
			return err
		}
		var ids []string
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return err
			}
			ids = append(ids, id)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		if len(ids) == 0 {
			return nil
		}
		picked, err := json.Marshal(ids)
		if err != nil {
			return err
		}
		for _, table := range executionOwnedTables {
			if _, err := tx.ExecContext(ctx, e.d.sql(`DELETE FROM {schema}.`+table+` WHERE execution_id IN (SELECT value FROM json_each(?))`), string(picked)); err != nil {
				return fmt.Errorf("deleting expired executions' %s: %w", table, err)
			}
		}
		res, err := tx.ExecContext(ctx, e.d.sql(`DELETE FROM {schema}.execution WHERE id IN (SELECT value FROM json_each(?))`), string(picked))
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		deleted = int(n)
		return err
	})
	if err != nil {
		return 0, err
	}
	return deleted, nil
}
