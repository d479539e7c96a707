// Package payments is the reference payments platform: the flagship example of commandbus and
// what `commandbus demo` runs. It shows, on one database, how a bank moves money reliably across
// bounded contexts with durable processes, and how operators fix what gets stuck.
//
// # The story of a payment
//
// A client calls SubmitPayment (the REST API's POST /payments) with an idempotency key. The
// request is validated — amount, ISO 4217 currencies, accounts, value date — and every problem
// comes back at once; a key used before returns the first payment (DuplicatePaymentError, which
// says whether the request was the same; the API then replays its first answer, or refuses a
// different request with 409 naming the fields that differ). The
// payment is recorded, and its process starts in the caller's goroutine and runs until it has to
// wait: the answer says whether it completed at once.
//
// Two processes can run the same payment, chosen per payment or per batch:
//
//   - PaymentStep is sequential Go with deterministic replay: it marks the payment
//     PROCESSING, books risk (a command step to the risk context, compensated by UnwindRisk),
//     waits for a manual approval above the threshold, books FX for a cross-currency payment
//     (compensated by CancelFx), submits it (compensated by a recall), waits for the network's
//     L1 to L4 confirmations (5m, 5m, 3h, default) and marks it COMPLETE. At its cutoff the
//     deadline compensates whatever it did.
//   - PaymentManager is the process manager: CheckBalance → CheckDailyLimit →
//     BookFxContract (international only) → SubmitPayment, each a command whose reply advances
//     it, with the hold, the limit and the contract released in reverse on a business failure.
//
// Each step is a command to a bounded context, a handler on its own domain with its own tables:
// accounts (balances and holds), limits (daily usage), risk (bookings and approvals), fx (contracts,
// through an anti-corruption layer that calls an external FX REST API over HTTP with timeouts,
// bounded retries, a circuit breaker and the step key as Idempotency-Key) and payments (the
// submission). Handlers guard their effect with the step key "<execution id>:<step>", which is the
// same on every redelivery and every operator resubmission: payment_submission's UNIQUE
// idempotency key makes a second delivery return the first submission, and the submission posts
// its balanced ledger movement (through the FX desks for cross-currency payments) in the same
// transaction, so money is conserved per currency.
//
// # Simulation
//
// The externals are simulated: the risk engine, the FX provider (package fxapi, a real HTTP
// server on a random localhost port) and the payment network. A Behavior — a preset ("happy",
// "realistic", "chaos") or a JSON/YAML file — sets, per step, the chances of permanent,
// transient and business failures, timeouts and pending items, and a delay range. It travels
// with the payment, in the process state and in the commands, and every roll is drawn from the
// seed, the payment and the attempt, so a run is reproducible. The network simulator answers
// approvals and L1–L4 through the platform's own public operations; pending items wait in
// ListApprovals and ListPendingNetworkResponses for an operator. InjectFault makes one failure certain, for drills and tests.
//
// # Batches and operations
//
// RunScheduledPaymentsForDay takes the day's scheduled payments into one batch run, one batch
// item and one execution each; CreateBatch generates the payments first. Batch counts and status
// (NEW, RUNNING, PARTIAL, SUCCEEDED, FAILED) are computed from the executions whenever they are
// read. Operators approve or reject, answer the network, and act on stuck payments: Resubmit,
// SkipStep, CompensateAndAbort and ForceComplete (with evidence); every action is audited with
// its actor and lands in the execution log. Summary reports how a batch ended and its latency;
// CheckInvariants proves the promises: one submission per payment, money conserved, every
// payment finished or visibly waiting.
//
//	client, _ := commandbus.NewClient(drv, &commandbus.Config{Domains: payments.DefaultDomainConfigs(16)})
//	platform, _ := payments.New(client, payments.Options{Seed: 42})
//	_ = client.Start(ctx) // starts the FX API and the simulator too
//	res, _ := platform.SubmitPayment(ctx, payments.PaymentRequest{IdempotencyKey: "inv-1001",
//		DebitAccount: "CUST-EUR-001", CreditAccount: "BENE-USD-001", Amount: "1000.00",
//		Currency: "EUR", CreditCurrency: "USD"})
//	view, _ := platform.GetPayment(ctx, res.PaymentID)
package payments
