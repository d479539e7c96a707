// Package process runs sequential processes with deterministic replay (a process step
// manager): a process is plain Go that calls Step, Wait, SideEffect and CommandStep,
// and it survives crashes, restarts and redeliveries.
//
//	type Payment struct{ ID string; Approved bool; Contract string }
//
//	func (PaymentProcess) Execute(x *process.Execution[Payment]) error {
//		risk, err := process.Step(x, "bookRisk", func(ctx context.Context) (string, error) {
//			return riskService.Book(ctx, x.StepKey("bookRisk"), x.State.ID)
//		}, process.MaxAttempts(3), process.RetryDelay(5*time.Second),
//			process.Compensate(func(x *process.Execution[Payment]) error { return riskService.Unwind(x.State.ID) }))
//		if err != nil {
//			return err
//		}
//		if err := x.Wait("awaitApproval", func() bool { return x.State.Approved }, 2*time.Hour); err != nil {
//			return err
//		}
//		fx, err := process.CommandStep[Payment, BookFx, FxResult](x, "bookFx", "fx", "BookFx", BookFx{ID: x.State.ID})
//		if err != nil {
//			return err
//		}
//		x.State.Contract = fx.Contract
//		return nil
//	}
//
// A manager registers its process type with the client's orchestration runtime:
//
//	rt, err := orchestration.New(client, orchestration.Config{})
//	payments, err := process.NewManager(rt, PaymentProcess{})
//
// How it works:
//
//   - Every execution is a row of the execution core with its state, timers, lease and fence, and
//     an append-only log. Execute runs from the top each time the execution resumes; completed
//     steps, satisfied waits and side effects return their recorded results, in recorded order.
//     If the code now calls something else at a recorded position, the execution stops in the
//     troubleshooting queue with code NONDETERMINISTIC and nothing re-runs.
//   - A completed step is written durably before the next step's effect begins (grouped with other
//     executions' writes into one commit), so a step runs twice only if a crash fell between its
//     effect and that write. StepKey gives each step a stable idempotency key for downstream
//     systems to deduplicate on.
//   - A building block that must stop returns an error wrapping ErrSuspended; Execute returns it.
//     Waits suspend WAITING_FOR_ASYNC until ProcessAsyncResponse delivers a response (stored
//     durably first, applied in order by whichever runner holds the execution); transient
//     failures schedule a retry (WAITING_FOR_RETRY, delay·2^attempt capped at five minutes) that
//     a poller picks up — no goroutine ever sleeps on a retry.
//   - CommandStep sends a command to another domain and waits for its reply on the process
//     domain's reply queue: the target domain's concurrency is the rate limit, so a process never
//     calls a rate-limited external itself.
//   - Business failures run the compensations of completed steps in reverse order (and of
//     command steps whose command was sent without the step completing: a failure reply does
//     not prove that nothing took effect); permanent
//     failures, exhausted retries, timed-out waits and deadlines (by the configured action) go
//     to the troubleshooting queue, where Retry, CancelOverride, CompleteOverride and Skip act,
//     each audited with actor and reason.
//   - Search attributes (WithAttributes at start, Execution.SetAttribute from the code) are short
//     key/value pairs written with the checkpoints; List finds executions by them
//     (ListParams.Attributes) and Get returns them. With process.retention set, ended executions
//     are deleted with their log and attributes once older than the retention.
//   - Suspend pauses an execution and Resume continues it, both audited and logged. An execution
//     a runner holds finishes its running step and stops before the next one; nothing runs a
//     suspended execution, and responses that arrive are kept for after the resume. Its deadline
//     and its wait's timeout keep counting while it is suspended, but their actions wait: they
//     apply at once on Resume if the time passed meanwhile. CancelOverride and CompleteOverride
//     also act on a suspended execution.
//   - A step's function may run longer than the execution lease: while it runs, the runner
//     renews the lease (a fenced heartbeat every third of the lease), so no other runner takes
//     the execution over and runs the step a second time.
package process
