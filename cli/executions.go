package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/orchestration"
)

// newExecutionsCommand is `executions`: every model's executions, by id.
func newExecutionsCommand(cfg Config) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "executions",
		Short: "List, show, start and act on executions of every model (processes, workflows)",
		Long: "executions operates any execution by id, whatever its model: list and show them, start one from JSON,\n" +
			"and retry, cancel, complete or skip a step of one. Every action is audited with --actor and --reason.",
	}
	cmd.AddCommand(newExecutionsListCommand(), newExecutionsShowCommand(cfg), newExecutionsStartCommand(cfg),
		newExecutionActionCommand(cfg, "retry", "Move an execution out of the troubleshooting queue with a fresh attempt budget", ""),
		newExecutionActionCommand(cfg, "cancel", "Cancel an execution (--compensate runs its compensations first)", ""),
		newExecutionActionCommand(cfg, "complete", "Force-complete an execution (--state sets state fields first)", ""),
		newExecutionActionCommand(cfg, "skip", "Record a failed step as done (--step, --result) and move the execution on", ""),
		newExecutionActionCommand(cfg, "suspend", "Suspend an execution: running steps finish, no other starts", ""),
		newExecutionActionCommand(cfg, "resume", "Resume a suspended execution where it stopped", ""),
		newExecutionsSignalCommand(cfg))
	return cmd
}

func newExecutionsListCommand() *cobra.Command {
	var db DatabaseFlags
	var output outputFlag
	var params driver.ExecutionListParams
	var statuses []string
	var list listFlags
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List executions, newest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			for _, s := range statuses {
				st := driver.ExecutionStatus(strings.ToUpper(s))
				if !st.Valid() {
					return usageErrorf("--status %q: not an execution status", s)
				}
				params.Statuses = append(params.Statuses, st)
			}
			if err := list.check(); err != nil {
				return err
			}
			database, err := openMigrated(cmd.Context(), db.URL, db.Schema, 2)
			if err != nil {
				return err
			}
			defer database.Close()
			rows, err := readPages(cmd, &list, rowID, func(before uuid.UUID, limit int) ([]*driver.ExecutionRow, error) {
				params.BeforeID, params.Limit = before, limit
				return database.Executor().ExecutionList(cmd.Context(), &params)
			})
			if err != nil {
				return err
			}
			return writeList(cmd.OutOrStdout(), &output, rows, "no execution matches",
				"ID\tMODEL\tTYPE\tSTATUS\tSTEP\tERROR\tUPDATED", func(x *driver.ExecutionRow) string {
					return fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%s\t%s", x.ID, x.Model, x.Type, x.Status, x.Step,
						truncate(joinNonEmpty(": ", x.ErrorCode, x.ErrorMessage), 50), x.UpdatedAt.UTC().Format("2006-01-02 15:04:05Z"))
				})
		},
	}
	db.Register(cmd, "")
	cmd.Flags().StringVar(&params.Model, "model", "", "only this model (process, workflow)")
	cmd.Flags().StringVar(&params.Type, "type", "", "only this type")
	cmd.Flags().StringSliceVar(&statuses, "status", nil, "only these statuses (comma-separated)")
	cmd.Flags().StringVar(&params.BusinessKey, "business-key", "", "only this business key")
	list.register(cmd, 100)
	output.register(cmd)
	return cmd
}

// newExecutionsShowCommand is `executions show`: an execution as its model describes it (with the
// model's result, such as a saga's per-step outcomes and compensations), or as stored when this
// binary runs no model of its type.
func newExecutionsShowCommand(cfg Config) *cobra.Command {
	var db DatabaseFlags
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "show ID",
		Short: "Show an execution of any model with its state, log and result",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := uuid.Parse(args[0])
			if err != nil {
				return usageErrorf("execution id: %v", err)
			}
			_, rt, closeDB, err := openProcesses(cmd, &db, cfg)
			if err != nil {
				return err
			}
			defer closeDB()
			exec := rt.Client().Driver().Executor()
			row, err := exec.ExecutionGet(cmd.Context(), id)
			if err != nil {
				return fmt.Errorf("execution %s: %w", id, err)
			}
			inst := &orchestration.InstanceJSON{ExecutionRow: row}
			if ops := rt.OperationsFor(row); ops != nil {
				if inst, err = ops.GetJSON(cmd.Context(), id); err != nil {
					return err
				}
			} else if inst.Log, err = exec.ExecutionLogList(cmd.Context(), id); err != nil {
				return err
			}
			if asJSON {
				return WriteJSON(cmd.OutOrStdout(), inst)
			}
			printExecution(cmd.OutOrStdout(), inst.ExecutionRow, inst.Log)
			if inst.Result != nil {
				result, err := json.MarshalIndent(inst.Result, "  ", "  ")
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "result:\n  %s\n", result)
			}
			return nil
		},
	}
	db.Register(cmd, "")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func newExecutionsStartCommand(cfg Config) *cobra.Command {
	var db DatabaseFlags
	var input string
	var req orchestration.StartRequest
	var id string
	cmd := &cobra.Command{
		Use:   "start MODEL TYPE",
		Short: "Start an execution from JSON input; the running workers or serve instances run it",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if input != "" {
				if !json.Valid([]byte(input)) {
					return usageErrorf("--input is not valid JSON")
				}
				req.Input = json.RawMessage(input)
			}
			if id != "" {
				var err error
				if req.ID, err = uuid.Parse(id); err != nil {
					return usageErrorf("--id: %v", err)
				}
			}
			_, rt, closeDB, err := openProcesses(cmd, &db, cfg)
			if err != nil {
				return err
			}
			defer closeDB()
			ops := rt.Operations(args[0], args[1])
			if ops == nil {
				return fmt.Errorf("no %s %q in this binary; known: %s", args[0], args[1], knownDefinitions(rt))
			}
			starter, ok := ops.(orchestration.Starter)
			if !ok {
				return fmt.Errorf("%s %q cannot be started from JSON", args[0], args[1])
			}
			started, err := starter.StartJSON(cmd.Context(), req)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "started %s %s: %s\n", args[0], args[1], started)
			return nil
		},
	}
	db.Register(cmd, "")
	cmd.Flags().StringVar(&input, "input", "", "the input as JSON")
	cmd.Flags().StringVar(&id, "id", "", "the execution id (starting an existing id does nothing)")
	cmd.Flags().StringVar(&req.BusinessKey, "business-key", "", "the business key")
	cmd.Flags().StringVar(&req.TenantID, "tenant", "", "the tenant")
	cmd.Flags().BoolVar(&req.DryRun, "dry-run", false, "walk a workflow's steps without running any")
	return cmd
}

func newExecutionsSignalCommand(cfg Config) *cobra.Command {
	var db DatabaseFlags
	var payload, signalID string
	cmd := &cobra.Command{
		Use:   "signal ID NAME",
		Short: "Send a named signal (--payload JSON) to an execution; one sent before it waits is buffered",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := uuid.Parse(args[0])
			if err != nil {
				return usageErrorf("execution id: %v", err)
			}
			if payload != "" && !json.Valid([]byte(payload)) {
				return usageErrorf("--payload is not valid JSON")
			}
			_, rt, closeDB, err := openProcesses(cmd, &db, cfg)
			if err != nil {
				return err
			}
			defer closeDB()
			sent, duplicate, err := rt.Signal(cmd.Context(), id, args[1], json.RawMessage(payload), signalID)
			if err != nil {
				return fmt.Errorf("signal %s: %w", id, err)
			}
			if duplicate {
				fmt.Fprintf(cmd.OutOrStdout(), "signal %s was already sent to %s: nothing changed\n", sent, id)
				return nil
			}
			fmt.Fprintf(cmd.OutOrStdout(), "signal %q (%s) sent to %s\n", args[1], sent, id)
			return nil
		},
	}
	db.Register(cmd, "")
	cmd.Flags().StringVar(&payload, "payload", "", "the payload as JSON")
	cmd.Flags().StringVar(&signalID, "id", "", "the signal id (sending an id again does nothing); empty: generated")
	return cmd
}

func knownDefinitions(rt *orchestration.Runtime) string {
	var names []string
	for _, o := range rt.All() {
		names = append(names, o.Model()+" "+o.Type())
	}
	return strings.Join(names, ", ")
}

// bulkStatuses are the statuses an action over many selects by default: the executions the
// action is for.
func bulkStatuses(action string) []driver.ExecutionStatus {
	switch action {
	case "resume":
		return []driver.ExecutionStatus{driver.ExecutionSuspended}
	case "suspend":
		return []driver.ExecutionStatus{driver.ExecutionPending, driver.ExecutionWaitingForAsync, driver.ExecutionWaitingForRetry}
	}
	return []driver.ExecutionStatus{driver.ExecutionWaitingForTSQ}
}

// newExecutionActionCommand is `executions ACTION [ID]` and, with tsqModel set, `tsq processes
// ACTION [ID]` (which selects only executions of that model).
func newExecutionActionCommand(cfg Config, action, short, tsqModel string) *cobra.Command {
	var db DatabaseFlags
	var op commandbus.OperatorAction
	var compensate bool
	var state, step, result string
	var bulk bulkFlags
	var output outputFlag
	var model string
	var statuses []string
	defaults := bulkStatuses(action)
	defaultNames := make([]string, len(defaults))
	for i, st := range defaults {
		defaultNames[i] = string(st)
	}
	cmd := &cobra.Command{
		Use:   action + " [ID]",
		Short: short,
		Long: short + ".\n\nWith an ID, acts on that execution. Without, acts on every execution that matches the filters\n" +
			"(--status, default " + strings.Join(defaultNames, ",") + "; --domain, --type, --tenant, --error-code, --batch,\n" +
			"--older-than): --dry-run lists them, --yes acts, each audited separately with the one --reason.",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := bulk.check(len(args) == 1); err != nil {
				return err
			}
			if len(args) == 1 && (model != "" || len(statuses) > 0) {
				return usageErrorf("give an ID or filters (--model, --status, ...), not both")
			}
			selected := defaults
			if len(statuses) > 0 {
				selected = nil
				for _, s := range statuses {
					st := driver.ExecutionStatus(strings.ToUpper(s))
					if !st.Valid() {
						return usageErrorf("--status %q: not an execution status", s)
					}
					selected = append(selected, st)
				}
			}
			var overrides map[string]any
			if state != "" {
				if err := json.Unmarshal([]byte(state), &overrides); err != nil {
					return usageErrorf("--state must be a JSON object: %v", err)
				}
			}
			if result != "" && !json.Valid([]byte(result)) {
				return usageErrorf("--result is not valid JSON")
			}
			var id uuid.UUID
			if len(args) == 1 {
				var err error
				if id, err = uuid.Parse(args[0]); err != nil {
					return usageErrorf("execution id: %v", err)
				}
			}
			client, rt, closeDB, err := openProcesses(cmd, &db, cfg)
			if err != nil {
				return err
			}
			defer closeDB()
			exec := client.Driver().Executor()
			act := func(ctx context.Context, id uuid.UUID) (*driver.ExecutionRow, error) {
				row, err := exec.ExecutionGet(ctx, id)
				if err != nil {
					return nil, fmt.Errorf("execution %s: %w", id, err)
				}
				if action == "complete" && cfg.CompletionRule != nil {
					// The application's rule, the same the REST API and the console apply (a
					// payment, say, is completed by hand only on evidence that it was made).
					if err := cfg.CompletionRule(row.Type, overrides); err != nil {
						return nil, fmt.Errorf("complete %s: %w (pass it with --state)", id, err)
					}
				}
				ops := rt.OperationsFor(row)
				if ops == nil {
					return nil, fmt.Errorf("execution %s is a %s %q, which this binary does not run", id, row.Model, row.Type)
				}
				switch action {
				case "retry":
					err = ops.Retry(ctx, id, op)
				case "cancel":
					err = ops.CancelOverride(ctx, id, compensate, op)
				case "complete":
					err = ops.CompleteOverride(ctx, id, overrides, op)
				case "skip":
					err = ops.Skip(ctx, id, step, json.RawMessage(result), op)
				case "suspend":
					err = ops.Suspend(ctx, id, op)
				case "resume":
					err = ops.Resume(ctx, id, op)
				}
				if err != nil {
					return nil, fmt.Errorf("%s %s: %w", action, id, err)
				}
				return exec.ExecutionGet(ctx, id)
			}
			if len(args) == 0 {
				m := model
				if tsqModel != "" {
					m = tsqModel
				}
				items, err := selectExecutions(cmd.Context(), exec, &bulk, m, selected, time.Now())
				if err != nil {
					return err
				}
				return runBulk(cmd, &output, action, bulk.dryRun, items, func(ctx context.Context, id uuid.UUID) (string, error) {
					after, err := act(ctx, id)
					if err != nil {
						return "", err
					}
					return string(after.Status), nil
				})
			}
			if bulk.dryRun {
				row, err := exec.ExecutionGet(cmd.Context(), id)
				if err != nil {
					return fmt.Errorf("execution %s: %w", id, err)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "would %s execution %s (now %s); nothing changed\n", action, id, row.Status)
				return nil
			}
			after, err := act(cmd.Context(), id)
			if err != nil {
				return err
			}
			if output.structured() {
				return output.writeOne(cmd.OutOrStdout(), after)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "execution %s is now %s (by %s: %s)\n", id, after.Status, op.Actor, op.Reason)
			return nil
		},
	}
	db.Register(cmd, "")
	cmd.Flags().StringVar(&op.Actor, "actor", defaultActor(), "who takes the action (audited)")
	cmd.Flags().StringVar(&op.Reason, "reason", "", "why (audited; required)")
	_ = cmd.MarkFlagRequired("reason")
	switch action {
	case "cancel":
		cmd.Flags().BoolVar(&compensate, "compensate", false, "run the compensations of completed steps first")
	case "complete":
		cmd.Flags().StringVar(&state, "state", "", "state fields to set first, as a JSON object")
	case "skip":
		cmd.Flags().StringVar(&step, "step", "", "the failed step to record as done (required)")
		cmd.Flags().StringVar(&result, "result", "", "the step's result as JSON")
		_ = cmd.MarkFlagRequired("step")
	}
	bulk.register(cmd, "executions")
	if tsqModel == "" {
		cmd.Flags().StringVar(&model, "model", "", "without ID: only executions of this model (process, workflow, saga, tcc)")
	}
	cmd.Flags().StringSliceVar(&statuses, "status", nil, "without ID: only executions in these statuses (default "+strings.Join(defaultNames, ",")+")")
	output.register(cmd)
	return cmd
}
