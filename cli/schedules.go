package cli

import (
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/schedule"
)

// newSchedulesCommand is `schedules`: durable schedules that start executions.
func newSchedulesCommand(cfg Config) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "schedules",
		Short: "List, create, pause, resume, trigger and delete durable schedules",
		Long: "schedules manages the schedules that start executions of the binary's definitions on a cron\n" +
			"expression with seconds and a time zone, at a fixed rate, or with a fixed delay. The running\n" +
			"serve or worker instances fire them; a tick starts one execution across every replica.",
	}
	cmd.AddCommand(newSchedulesListCommand(cfg), newSchedulesCreateCommand(cfg),
		newScheduleActionCommand(cfg, "pause", "Pause a schedule: it fires nothing until resumed"),
		newScheduleActionCommand(cfg, "resume", "Resume a paused schedule from now (the pause's ticks are not caught up)"),
		newScheduleActionCommand(cfg, "trigger", "Start the schedule's execution now, paused or not"),
		newScheduleActionCommand(cfg, "delete", "Delete a schedule (its executions are kept)"))
	return cmd
}

// openScheduler opens the database with the binary's definitions and a scheduler that fires
// nothing (the running instances do).
func openScheduler(cmd *cobra.Command, db *DatabaseFlags, cfg Config) (*schedule.Scheduler, func(), error) {
	_, rt, closeDB, err := openProcesses(cmd, db, cfg)
	if err != nil {
		return nil, nil, err
	}
	s, err := schedule.New(rt, schedule.Config{Passive: true})
	if err != nil {
		closeDB()
		return nil, nil, err
	}
	return s, closeDB, nil
}

func newSchedulesListCommand(cfg Config) *cobra.Command {
	var db DatabaseFlags
	var output outputFlag
	var list listFlags
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List schedules with their next fire time and last result",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := list.check(); err != nil {
				return err
			}
			s, closeDB, err := openScheduler(cmd, &db, cfg)
			if err != nil {
				return err
			}
			defer closeDB()
			rows, err := readPagesAfter(cmd, &list, func(v *schedule.Schedule) string { return v.Name },
				func(after string, limit int) ([]*schedule.Schedule, error) {
					return s.ListAfter(cmd.Context(), after, limit)
				})
			if err != nil {
				return err
			}
			return writeList(cmd.OutOrStdout(), &output, rows, "no schedule",
				"ID\tNAME\tTARGET\tTRIGGER\tENABLED\tNEXT FIRE\tLAST FIRE\tLAST STATUS", func(v *schedule.Schedule) string {
					return fmt.Sprintf("%s\t%s\t%s %s\t%s\t%t\t%s\t%s\t%s", v.ID, v.Name, v.Model, v.Type, describeTrigger(v), v.Enabled,
						formatTimePtr(v.NextFireAt), formatTimePtr(v.LastFireAt), joinNonEmpty(": ", v.LastStatus, truncate(v.LastError, 40)))
				})
		},
	}
	db.Register(cmd, "")
	list.register(cmd, 100)
	output.register(cmd)
	return cmd
}

func describeTrigger(v *schedule.Schedule) string {
	switch v.Trigger {
	case "CRON":
		zone := v.Zone
		if zone == "" {
			zone = "UTC"
		}
		return fmt.Sprintf("cron %q %s", v.Cron, zone)
	case "FIXED_RATE":
		return "every " + v.Interval
	default:
		return v.Interval + " after the last"
	}
}

func formatTimePtr(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}

func newSchedulesCreateCommand(cfg Config) *cobra.Command {
	var db DatabaseFlags
	var req schedule.Request
	var input string
	var paused bool
	var actor, reason string
	cmd := &cobra.Command{
		Use:   "create NAME",
		Short: "Create a schedule of a definition (--model, --type) with --cron (and --zone), --fixed-rate or --fixed-delay",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			req.Name = args[0]
			if input != "" {
				req.Input = []byte(input)
			}
			if paused {
				enabled := false
				req.Enabled = &enabled
			}
			spec, err := req.Spec()
			if err != nil {
				return err
			}
			s, closeDB, err := openScheduler(cmd, &db, cfg)
			if err != nil {
				return err
			}
			defer closeDB()
			op := commandbus.OperatorAction{Actor: actor, Reason: reason}
			created, err := s.Create(cmd.Context(), spec, op)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "created schedule %s (%s): %s %s, %s, next fire %s\n", created.Name, created.ID,
				created.Model, created.Type, describeTrigger(created), formatTimePtr(created.NextFireAt))
			return nil
		},
	}
	db.Register(cmd, "")
	f := cmd.Flags()
	f.StringVar(&req.Model, "model", "", "the model of the definition to start (process, workflow, saga, tcc)")
	f.StringVar(&req.Type, "type", "", "the execution type to start")
	f.StringVar(&req.Cron, "cron", "", `six fields, seconds first: "0 0 2 * * *"`)
	f.StringVar(&req.Zone, "zone", "", "time zone of --cron (default UTC)")
	f.StringVar(&req.FixedRate, "fixed-rate", "", "start one every interval (90s, PT1M, 60000)")
	f.StringVar(&req.FixedDelay, "fixed-delay", "", "start one this long after the previous ended")
	f.StringVar(&req.InitialDelay, "initial-delay", "", "postpone the first tick")
	f.StringVar(&input, "input", "", "the executions' input as JSON (default {})")
	f.StringVar(&req.Description, "description", "", "what the schedule is for")
	f.StringVar(&req.MisfirePolicy, "misfire", "", "missed ticks: FIRE_ONCE (default), FIRE_ALL, SKIP")
	f.IntVar(&req.MisfireLimit, "misfire-limit", 0, "most missed ticks FIRE_ALL starts (default 100)")
	f.BoolVar(&paused, "paused", false, "create it paused")
	f.StringVar(&actor, "actor", defaultActor(), "who creates it (audited)")
	f.StringVar(&reason, "reason", "", "why (audited)")
	return cmd
}

func newScheduleActionCommand(cfg Config, action, short string) *cobra.Command {
	var db DatabaseFlags
	var actor, reason string
	cmd := &cobra.Command{
		Use:   action + " ID|NAME",
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, closeDB, err := openScheduler(cmd, &db, cfg)
			if err != nil {
				return err
			}
			defer closeDB()
			ctx := cmd.Context()
			op := commandbus.OperatorAction{Actor: actor, Reason: reason}
			id, err := uuid.Parse(args[0])
			if err != nil {
				found, err := s.GetByName(ctx, args[0])
				if err != nil {
					return fmt.Errorf("schedule %q: %w", args[0], err)
				}
				id = found.ID
			}
			out := cmd.OutOrStdout()
			switch action {
			case "pause", "resume":
				act := s.Pause
				if action == "resume" {
					act = s.Resume
				}
				v, err := act(ctx, id, op)
				if err != nil {
					return err
				}
				fmt.Fprintf(out, "schedule %s is %s; next fire %s\n", v.Name, map[bool]string{true: "enabled", false: "paused"}[v.Enabled], formatTimePtr(v.NextFireAt))
			case "trigger":
				execID, err := s.Trigger(ctx, id, op)
				if err != nil {
					return err
				}
				fmt.Fprintf(out, "schedule %s triggered: execution %s\n", args[0], execID)
			case "delete":
				if err := s.Delete(ctx, id, op); err != nil {
					return err
				}
				fmt.Fprintf(out, "schedule %s deleted\n", args[0])
			}
			return nil
		},
	}
	db.Register(cmd, "")
	cmd.Flags().StringVar(&actor, "actor", defaultActor(), "who acts (audited)")
	cmd.Flags().StringVar(&reason, "reason", "", "why (audited)")
	return cmd
}
