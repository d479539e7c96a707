package outbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/dbtest"
	"github.com/commandbus/commandbus/outbox"
)

func packMsg(transport, key, id string) *driver.OutboxInsertParams {
	return &driver.OutboxInsertParams{
		Category: driver.OutboxCategoryEvent, Transport: transport, Topic: "events.T", Key: key,
		Type: "T-" + id, MessageID: id, Payload: json.RawMessage(fmt.Sprintf(`{"n":%q,"nested":{"a":[1,2,"]"]}}`, id)),
		Headers: map[string]string{outbox.HeaderMessageID: id, "executionId": key},
	}
}

// Pack folds the messages of one key and destination into one row, where the first of them
// was, and leaves alone what it must not pack.
func TestPack(t *testing.T) {
	t.Parallel()
	a1, b1, a2, a3 := packMsg("kafka", "A", "a1"), packMsg("kafka", "B", "b1"), packMsg("kafka", "A", "a2"), packMsg("kafka", "A", "a3")
	keyless1, keyless2 := packMsg("kafka", "", "n1"), packMsg("kafka", "", "n2")
	hook1, hook2 := packMsg(outbox.TransportWebhook, "A", "w1"), packMsg(outbox.TransportWebhook, "A", "w2")
	later := packMsg("kafka", "A", "later")
	later.Delay = time.Second
	otherTopic := packMsg("kafka", "A", "t1")
	otherTopic.Topic = "events.Other"

	out, err := outbox.Pack([]*driver.OutboxInsertParams{a1, b1, keyless1, a2, hook1, later, keyless2, a3, hook2, otherTopic})
	require.NoError(t, err)
	require.Len(t, out, 8, "a1, a2 and a3 share a row; nothing else is packed")
	packed := out[0]
	require.Equal(t, outbox.TypePacked, packed.Type)
	require.Equal(t, "A", packed.Key)
	require.Equal(t, "a1", packed.MessageID)
	require.Equal(t, "3", packed.Headers[outbox.HeaderPacked])
	require.True(t, json.Valid(packed.Payload), "%s", packed.Payload)
	require.Equal(t, "A", packed.Headers["executionId"], "the headers all its messages share are the row's, once")
	require.NotContains(t, string(packed.Payload), "executionId")
	require.Contains(t, string(packed.Payload), `"headers":{"messageId":"a2"}`, "each message keeps its own")
	require.Equal(t, []*driver.OutboxInsertParams{b1, keyless1, hook1, later, keyless2, hook2, otherTopic}, out[1:],
		"a message alone for its key, keyless, delayed or a webhook stays as it was, in its place")

	single, err := outbox.Pack([]*driver.OutboxInsertParams{a1})
	require.NoError(t, err)
	require.Same(t, a1, single[0])

	empty := packMsg("kafka", "A", "e")
	empty.Payload = nil
	_, err = outbox.Pack([]*driver.OutboxInsertParams{a1, empty})
	require.ErrorContains(t, err, `message "e" has no payload`)
}

// flakyPublisher fails each message id of failOnce the first time it sees it.
type flakyPublisher struct {
	mu        sync.Mutex
	failOnce  map[string]bool
	published []*driver.OutboxRow
}

func (p *flakyPublisher) Transport() string { return outbox.TransportKafka }

func (p *flakyPublisher) Publish(_ context.Context, msgs []*driver.OutboxRow) []error {
	p.mu.Lock()
	defer p.mu.Unlock()
	errs := make([]error, len(msgs))
	failedKey := map[string]bool{}
	for i, m := range msgs {
		switch {
		case failedKey[m.Key]:
			errs[i] = outbox.ErrNotSent // what a publisher keeping key order answers
		case p.failOnce[m.MessageID]:
			delete(p.failOnce, m.MessageID)
			errs[i], failedKey[m.Key] = errors.New("broker hiccup"), true
		default:
			p.published = append(p.published, m)
		}
	}
	return errs
}

// A packed row's messages are published one by one, in order, each with its own id, type,
// headers and payload. A row whose messages failed in part is published again whole, after the
// messages already sent (consumers deduplicate by message id); its key waits for it.
func TestRelayPublishesPackedRows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		msgs := []*driver.OutboxInsertParams{packMsg("kafka", "A", "a1"), packMsg("kafka", "B", "b1"), packMsg("kafka", "A", "a2"),
			packMsg("kafka", "A", "a3"), packMsg("kafka", "B", "b2")}
		packed, err := outbox.Pack(msgs)
		require.NoError(t, err)
		require.Len(t, packed, 2)
		more := []*driver.OutboxInsertParams{packMsg("kafka", "A", "a4")} // a later row of key A
		for _, batch := range [][]*driver.OutboxInsertParams{packed, more} {
			_, err = drv.Executor().OutboxInsertMany(ctx, &driver.OutboxInsertManyParams{Messages: batch})
			require.NoError(t, err)
		}

		pub := &flakyPublisher{failOnce: map[string]bool{"a2": true}}
		relay := startRelay(t, drv, outbox.RelayConfig{Publishers: []outbox.Publisher{pub}, PollInterval: 20 * time.Millisecond,
			InitialBackoff: 20 * time.Millisecond, MaxBackoff: 40 * time.Millisecond})
		relay.Kick()
		waitFor(t, "every row published", func() bool {
			rows, err := drv.Executor().OutboxList(ctx, &driver.OutboxListParams{Statuses: []driver.OutboxStatus{driver.OutboxStatusNew}})
			require.NoError(t, err)
			return len(rows) == 0
		})
		byKey := map[string][]string{}
		pub.mu.Lock()
		for _, m := range pub.published {
			byKey[m.Key] = append(byKey[m.Key], m.MessageID)
			require.Equal(t, "T-"+m.MessageID, m.Type)
			require.Equal(t, map[string]string{outbox.HeaderMessageID: m.MessageID, "executionId": m.Key}, m.Headers)
			require.NotContains(t, m.Headers, outbox.HeaderPacked)
			require.JSONEq(t, fmt.Sprintf(`{"n":%q,"nested":{"a":[1,2,"]"]}}`, m.MessageID), string(m.Payload))
		}
		pub.mu.Unlock()
		require.Equal(t, []string{"b1", "b2"}, byKey["B"])
		require.Equal(t, []string{"a1", "a1", "a2", "a3", "a4"}, byKey["A"],
			"a2 failed: its row went again whole (a1 twice), and a4 waited for it")

		rows, err := drv.Executor().OutboxList(ctx, &driver.OutboxListParams{})
		require.NoError(t, err)
		require.Len(t, rows, 3)
		for _, r := range rows {
			require.Equal(t, driver.OutboxStatusPublished, r.Status)
		}
	})
}

// A packed row that does not decode is refused, never published in part, and never panics.
func TestUnpackRefusesBrokenRows(t *testing.T) {
	t.Parallel()
	for name, payload := range map[string]string{"not JSON": `{"id":`, "no messages": `[]`, "an object": `{"id":"a"}`} {
		rows := []*driver.OutboxRow{{ID: 7, Type: outbox.TypePacked, Key: "k", Payload: json.RawMessage(payload)}}
		_, err := outbox.Unpack(rows)
		require.ErrorContains(t, err, "outbox row 7: permanent: a packed outbox row that does not decode", name)
	}
}
