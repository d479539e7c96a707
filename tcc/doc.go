// Package tcc runs Try-Confirm-Cancel transactions on the orchestration runtime. A transaction
// has ordered participants; each reserves something in its try phase, makes the reservation
// final in its confirm phase and releases it in its cancel phase:
//
//   - the tries run in participant order; when they all succeed, the confirms run (all at once,
//     each outcome recorded as it arrives) and the transaction ends CONFIRMED;
//   - a try that fails for good (after its retries) cancels the participants whose try
//     succeeded, in reverse order, and the transaction ends CANCELED; the try of an optional
//     participant may fail without cancelling anything (it is then neither confirmed nor
//     cancelled);
//   - a confirm that fails for good cancels the participants that have not confirmed: CANCELED;
//   - a cancel that fails for good ends the transaction FAILED, parked in the troubleshooting
//     queue with CANCEL_FAILED, where an operator retries the cancels, skips one, or completes
//     the transaction by hand.
//
// A participant's phases are local functions (Participant) or commands to another domain
// (CommandParticipant), whose replies resume the transaction.
//
// Every phase of every participant has its own retry policy and timeout, resolved phase →
// participant → definition → configuration (Register's WithConfig). Retries are durable: a
// failed attempt records when the next one is due and releases the execution; no goroutine
// sleeps. The decision to confirm or to cancel is recorded before the first confirm or cancel
// runs, so a runner that dies mid-phase is replaced by one that finishes the same phase, and a
// phase effect that was recorded is never run again. Confirm and cancel receive the try's result
// (Context.DecodeTryResult).
//
// A transaction's log is also its lifecycle: PHASE entries (STARTED, COMPLETED, FAILED) and one
// entry per participant attempt (entry types TRY, CONFIRM and CANCEL), which the runtime's
// execution observer sees as they commit; Events turns them into typed events.
//
// Participants that run in this module's handlers guard their effects with a Barrier, inside
// their own database transaction: duplicated phases do nothing, a cancel without a try succeeds
// and records the fact, and a try that arrives after its cancel is refused.
//
//	def := tcc.New("book-trip", 1).
//		Participant("flight", tryFlight, confirmFlight, cancelFlight).
//		Participant("car", tryCar, confirmCar, cancelCar, tcc.Optional())
//	m, err := tcc.Register(rt, def)
//	id, err := m.Start(ctx, trip, tcc.Immediate())
//	result, err := m.Result(ctx, id) // CONFIRMED, CANCELED or FAILED, per participant
package tcc
