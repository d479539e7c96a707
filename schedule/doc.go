// Package schedule starts executions on a schedule, durably and once per tick across replicas.
//
// A schedule targets one registered definition of the orchestration runtime, by (model, type),
// so it starts processes, workflows, sagas and TCC transactions alike, with a JSON input. Its
// trigger is one of:
//
//   - a cron expression with seconds (six fields: second minute hour day month weekday, parsed
//     by robfig/cron) in an IANA time zone. Across DST changes a job at a fixed time of day runs
//     once a day: a wall time that happens twice fires at its first occurrence, and one that does
//     not exist fires at the same distance after the change (02:30 becomes 03:30); expressions
//     that fire every hour follow real time;
//   - a fixed rate: every interval from the first tick;
//   - a fixed delay: an interval after the execution started last has ended.
//
// Both fixed kinds take an initial delay. Schedules are rows (table schedule), created at runtime
// through Scheduler.Create, the REST API (/api/schedules), the CLI (commandbus schedules) or the
// console, or declared in code with the definition (orchestration.Runtime.DeclareSchedule), in
// which case the scheduler creates the row when it starts and keeps it in line with the
// declaration (an operator's pause stays).
//
//	rt, _ := orchestration.New(client, orchestration.Config{})
//	reports, _ := workflow.NewManager(rt, reportDefinition)
//	_ = rt.DeclareSchedule(workflow.Model, "NightlyReport", orchestration.ScheduleSpec{
//		Name: "nightly-report", Cron: "0 0 2 * * *", Zone: "Europe/Paris", Input: json.RawMessage(`{"days":1}`)})
//	scheduler, _ := schedule.New(rt, schedule.Config{})
//	_ = client.Start(ctx) // the scheduler starts and stops with the client
//
// # One start per tick
//
// Every replica runs a scheduler. A due schedule is claimed by one replica at a time (FOR UPDATE
// SKIP LOCKED, a lease and a fence on the row); the replica starts one execution per due tick
// with an id derived from the schedule and the tick (TickExecutionID), inserted idempotently,
// then writes the next fire time under the fence. A replica that dies between the two leaves a
// lease that expires; the next replica computes the same ticks, hence the same ids, and starts
// nothing twice. An execution's business key is its schedule's name.
//
// The firing loop claims a schedule Config.Lead (1s) before its tick and creates the tick's
// execution then, runnable from the tick (orchestration.StartRequest.NotBefore): the engines'
// pollers take it up at the tick, never before, so neither the claim nor the insert makes the
// tick late. A definition that cannot start in batches (orchestration.BatchStarter) has its
// tick's execution started at the tick by a timer instead. A schedule paused or deleted within
// the lead still has that tick run.
//
// # Misfires
//
// A tick more than Config.MisfireThreshold behind the clock (the service was down) is missed;
// the schedule's policy decides: MisfireFireOnce (default) starts one execution for all of them,
// MisfireFireAll starts one per missed tick up to the schedule's limit, MisfireSkip starts none.
// Then the schedule continues with its next tick.
//
// # Periodic maintenance across replicas
//
// Work claims never need a leader: pollers claim rows with SKIP LOCKED and write under fences,
// so they run on every replica. Periodic jobs are different: each replica would repeat the same
// pass. Those that must run once per interval take a leased row in job_lease first (the role a
// ShedLock table plays), which shows the holder and the next run (Scheduler.JobLeases,
// GET /api/job-leases):
//
//   - retention of the outbox/inbox and of ended executions: deletes; safe but wasteful on every
//     replica, so leased;
//   - the command watchdog: its changes are fenced, so concurrent passes are harmless, but they
//     race to time out the same commands; leased;
//   - the stale-work report: several replicas would log the same report; leased.
//
// Safe, and needed, on every replica: the dead-letter depth gauge (each replica exports its own
// metrics), the execution engine's pollers and claims, the command workers, the outbox relay
// (claims with SKIP LOCKED), fixed-delay re-arming (one idempotent UPDATE), and the scheduler
// itself, whose unit of exclusion is the schedule row rather than one job row.
package schedule
