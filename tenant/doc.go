// Package tenant keeps tenants, their tiers and the capacity-limited admission of their
// executions.
//
// A tenant has an id, a tier and a status. A tier's limit is the number of executions a tenant
// may have active at once: FREE 1, PRO 5 and ENTERPRISE 20 unless configured otherwise
// (DefaultTierLimits, orchestration.Config.Admission.TierLimits), and a tenant may have a limit
// of its own (MaxActiveOverride).
//
// Any execution type of any model (process, workflow, saga, TCC) can be marked capacity-limited
// (orchestration.Runtime.LimitCapacity). Its executions need a tenant; they are inserted QUEUED
// and admitted (PENDING, holding one of the tenant's slots) only while the tenant holds fewer
// slots than its limit. An admitted execution keeps its slot until it is terminal, including
// while it waits for a reply, a signal, a timer, a retry, an operator (troubleshooting queue) or
// a resume (suspended).
//
// # Exact across replicas
//
// The limit is never exceeded, whatever the number of replicas. Every admission, at the start,
// in the admission dispatcher or at a release, runs in a transaction that first locks the
// tenant's row and only then counts the slots held (the executions with holds_slot set). While
// it holds the lock no other admission of that tenant runs, and the count, read after the lock
// was granted, sees every admission committed before; a release not yet committed still counts,
// so a race can only admit fewer, never more. On SQLite, writes are serialised anyway.
//
// # No poll delay, fair across tenants
//
// When a slot holder becomes terminal (by any statement: a checkpoint, a cancellation cascade,
// an operator action), a database trigger releases the slot and admits the tenant's oldest
// queued execution in the same transaction; the pollers are notified on commit. Should another
// transaction hold the tenant's row at that moment, the trigger does not wait (no deadlock
// between checkpoints of different tenants): it notifies the admission dispatcher, which admits
// right after. The dispatcher also admits when a limit is raised or a tenant reactivated, in
// rounds that serve the tenants with queued work and a free slot longest-served-last
// (round-robin). Because executions are admitted per tenant, one tenant's backlog never sits in
// front of another tenant's first execution: only admitted executions reach the pending
// poller, at most the sum of the limits.
//
// # Statuses, deferrals and failures
//
//   - active: executions are admitted as slots free up.
//   - suspended: queued executions stay QUEUED (held) until the tenant is active again; running
//     ones keep running and keep their slots.
//   - deleted: queued executions end FAILED with TENANT_DELETED, and so do any started later;
//     running ones finish.
//
// An execution started for a tenant that does not exist ends FAILED (TENANT_NOT_FOUND). Waiting
// for a slot is a deferral, not an attempt: it leaves retries at 0, is logged ("tenant at
// capacity") and counted (commandbus_admission_at_capacity_total). Queued executions whose type
// no runner of the instance has end FAILED (UNKNOWN_DEFINITION). A start error is the model's
// own retry (backoff, then FAILED or the troubleshooting queue with the error); the execution
// id is written before anything runs, so a retry always resumes the same execution. A runner
// that dies leaves its lease to expire; the pending poller claims the execution again and counts
// it (commandbus_admission_stale_recovered_total).
//
// # Successors, children and operators
//
// An execution that continues as new ends, so its slot is handed on; its successor starts
// QUEUED and waits for a slot like any other execution of its tenant. Children started by a
// parent's checkpoint are never queued, even when their type is capacity-limited: they run
// inside their parent's slot, which the parent holds until it is terminal.
//
// A QUEUED execution is never acquired: responses and signals sent to it are recorded and
// applied once it is admitted. An operator cancels it like any other execution (REST, CLI,
// console): a status update conditioned on QUEUED ends it CANCELLED, with its log entry,
// lifecycle event and audit row in the same transaction, so it and an admission cannot both
// apply and a cancelled queued execution never holds a slot. Other operator actions on a queued
// execution (complete, skip, retry) are refused as an invalid state. To stop all of a tenant's
// queued executions, suspend or delete the tenant.
//
// # Changing limits
//
// A raised limit, or a tenant made active again, is picked up by the admission dispatcher at
// once. A lowered limit pre-empts nothing: executions already admitted keep their slots until
// they end, so a tenant may hold more slots than its new limit for a while, and nothing more is
// admitted until it holds fewer than the limit.
package tenant
