// Package workflow runs declarative workflows on the orchestration runtime: a definition is a DAG
// of steps with dependencies, and every step whose dependencies are done runs, in parallel with
// the others that are ready (up to the layer concurrency).
//
//	def := workflow.New("onboarding", 1).
//		Step("verifyEmail", verifyEmail).
//		Step("kyc", runKYC, workflow.DependsOn("verifyEmail"), workflow.Retry(workflow.RetryPolicy{MaxAttempts: 5})).
//		Step("sanctions", screen, workflow.DependsOn("verifyEmail")).
//		Step("openAccount", openAccount, workflow.DependsOn("kyc", "sanctions"), workflow.Compensate(closeAccount))
//	onboarding, err := workflow.Register(rt, def)
//	id, err := onboarding.Start(ctx, Applicant{Email: "ada@example.com"})
//
// How it works:
//
//   - Register validates the definition (one error per problem: an empty definition, a duplicate
//     step, a missing dependency, a self-dependency, a cycle naming its steps) and computes its
//     layers with Kahn's algorithm.
//   - Replay is by step id: the execution's log folds into one record per step, so the order in
//     which parallel steps completed does not matter. Each execution records the definition's
//     hash at its start; resumed under a definition of another shape it parks in the
//     troubleshooting queue with DEFINITION_CHANGED, and an operator's Retry adopts the new one.
//   - Steps run in goroutines; their outcomes funnel to the one goroutine that holds the
//     execution's lease and checkpoints them (outcomes that arrive together share a checkpoint).
//     A step's record is durable before any step depending on it starts.
//   - A transient failure schedules a durable retry by the step's policy (exponential backoff with
//     optional jitter) while other branches go on; no goroutine sleeps. A permanent failure or
//     exhausted retries park the execution in the troubleshooting queue once the running steps
//     finish; a business failure (commandbus.BusinessRuleError) runs the compensations of the
//     completed steps (and of command steps that sent their command without completing) in
//     reverse completion order and ends COMPENSATED. A compensation that fails
//     parks the execution with COMPENSATION_FAILED.
//   - Besides local steps: Command sends a command to a domain and completes with its reply;
//     WaitSignal waits for a named signal (buffered if it came first); Sleep is a durable timer;
//     Child starts a child workflow and completes when it does.
//   - A step with a When condition that is false is recorded SKIPPED; its dependants go on. A
//     dry run records every step SKIPPED in layer order and runs nothing.
//   - Operators act through the runtime's operations (Retry, CancelOverride, CompleteOverride,
//     Skip), each audited with actor and reason, from the REST API, the console or the CLI.
package workflow
