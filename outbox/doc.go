// Package outbox is commandbus's reliable messaging substrate: the transactional outbox, the relay
// that publishes it to brokers, the idempotent inbox, and Envelope v1, the message every transport
// carries.
//
// # Truth first, publish later
//
// A change and the messages that announce it commit in one database transaction: Enqueue writes
// outbox rows with the caller's transaction, and nothing reaches a broker before that commit. The
// Relay then publishes: at once after the commit (a notification wakes it: the fast path) and on
// a poll (the sweeper that repairs missed wake-ups). It claims rows with FOR UPDATE SKIP LOCKED
// under a lease, so several relays can run at once; it publishes the rows of one key one after
// the other, in the order they were written; a failed publication backs off exponentially through
// next_at. A relay that dies between publishing and marking publishes again after its lease:
// delivery is at least once, and consumers dedupe.
//
// On PostgreSQL the relay takes only rows written by transactions older than every writing
// transaction still running (pg_snapshot_xmin): a transaction that commits after a later one can
// never be overtaken or skipped. The price: one long writing transaction anywhere in the cluster
// holds publishing back until it ends (read-only transactions do not count). Keep batch jobs'
// writing transactions short, or give them their own cluster.
//
// The relay's claim and its mark of what was published commit without waiting for the WAL
// flush: a lost lease means a claim again, a lost mark a publication again, both within at least
// once. While messages flow, the mark rides on the relay's next claim, a few milliseconds later,
// in the same transaction and round trip. Several messages of one key written by one transaction can share a row (Pack; the
// runtime packs a checkpoint's lifecycle events): the relay publishes them one by one, and
// Unpack reads them back for code that reads the table itself.
//
// # Exactly once at the business level
//
// Consumers record each message in the inbox, keyed by (message id, handler), in the transaction
// of the handler's effects: the first write wins, and a redelivered message changes nothing
// (Inbox counts it in commandbus_inbox_dedupe_hits_total).
//
// # Transports
//
// The relay publishes through Publishers: transport/amqp (commands and replies on RabbitMQ or
// any AMQP 0-9-1 broker, in the role of an IBM MQ queue manager) and transport/kafka (events). This package
// imports neither; the application wires them (cmd/commandbus does it from configuration). With no
// broker configured commandbus does not use the outbox at all: the PostgreSQL queue is the
// transport, and the command table is its own outbox.
//
//	exec, _ := drv.UnwrapTx(tx) // the caller's pgx.Tx or *sql.Tx
//	err := outbox.Enqueue(ctx, exec, &outbox.Message{
//		Category: outbox.CategoryEvent, Transport: outbox.TransportKafka,
//		Topic: "events.Payments", Key: paymentID, Envelope: envelope,
//	})
//	// ... tx.Commit: the relay publishes after the commit, never before.
package outbox
