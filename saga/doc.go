// Package saga runs sagas: a DAG of steps, each local or a command to a domain, where a failure
// undoes the steps that completed by running their compensations. Sagas run on the same runtime,
// runner and persistence as package workflow (layers in parallel, replay by step id, durable
// retries, timeouts, command steps, operator actions); what a saga adds is its compensation
// phase, which is durable and follows one of five policies:
//
//   - StrictSequential (the default): one at a time, in reverse completion order.
//   - GroupedParallel: the layers in reverse, the steps of one layer in parallel.
//   - RetryWithBackoff: as StrictSequential, each compensation retried by its retry policy;
//     a retry is a scheduled wake-up of the execution, never a sleeping goroutine.
//   - CircuitBreaker: as RetryWithBackoff; a Critical step whose compensation fails for good
//     stops the compensations not yet run.
//   - BestEffortParallel: all at once; failures are recorded.
//
// A compensation that fails for good is never silent: the saga parks in the troubleshooting
// queue with COMPENSATION_FAILED, where Retry runs the failed compensations again, Skip gives one
// up and CompleteOverride ends the saga.
//
// A step may expand over items of the saga's input (ExpandEach): it becomes one instance per item
// ("reserve:SKU-1", or "reserve#0"), in the same layer, each with its own retries, record and
// compensation.
//
//	def := saga.New("transfer", 1).
//		Step("debit", debit, saga.Compensate(refund)).
//		Step("credit", credit, saga.DependsOn("debit")).
//		Step("notify", notify, saga.DependsOn("credit"))
//	transfers, err := saga.Register(rt, def)
//	id, err := transfers.Start(ctx, Transfer{From: "A", To: "B", Amount: 100})
//	result, err := transfers.Result(ctx, id)
package saga
