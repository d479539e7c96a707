package outbox

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/jsonappend"
)

// TypePacked is the type of an outbox row that carries several messages of one key, written by
// one transaction (see Pack). The relay publishes each of them as a message of its own.
const TypePacked = "commandbus.packed"

// HeaderPacked is the header of a packed row: how many messages it carries.
const HeaderPacked = "x-commandbus-packed"

// errNoResult is the error of a message the publisher returned no result for.
var errNoResult = errors.New("publisher returned no result")

// packedPart is one message of a packed row's payload (a JSON array of them, in order).
type packedPart struct {
	MessageID string            `json:"id"`
	Type      string            `json:"type"`
	Headers   map[string]string `json:"headers,omitempty"`
	Payload   json.RawMessage   `json:"payload"`
}

// Pack folds the messages of msgs that share a category, transport, topic and key into one
// outbox row each, placed where the first of them was; the relay publishes a packed row's
// messages one by one, in their order, as if each had a row of its own. Ordering is per key, so
// what it changes for a consumer is only that the messages of one row are published together.
// One transaction writing several messages of one key (a checkpoint's lifecycle events) then
// costs one row to write, claim and mark instead of one per message. Messages without a key,
// with a delay or a due time, webhooks (one POST per row, each with its own attempts and dead
// letter) and groups of one are left as they are. The payloads must be JSON: they are copied into
// the packed row's JSON as they are, unchecked.
func Pack(msgs []*driver.OutboxInsertParams) ([]*driver.OutboxInsertParams, error) {
	type groupKey struct {
		category              driver.OutboxCategory
		transport, topic, key string
	}
	packable := func(m *driver.OutboxInsertParams) bool {
		return m.Key != "" && m.NextAt == nil && m.Delay <= 0 && m.Transport != TransportWebhook
	}
	groups := map[groupKey][]*driver.OutboxInsertParams{}
	for _, m := range msgs {
		if packable(m) {
			k := groupKey{m.Category, m.Transport, m.Topic, m.Key}
			groups[k] = append(groups[k], m)
		}
	}
	out := make([]*driver.OutboxInsertParams, 0, len(msgs))
	for _, m := range msgs {
		if !packable(m) {
			out = append(out, m)
			continue
		}
		k := groupKey{m.Category, m.Transport, m.Topic, m.Key}
		group, first := groups[k]
		if !first {
			continue // packed into the row of the group's first message
		}
		delete(groups, k)
		if len(group) == 1 {
			out = append(out, m)
			continue
		}
		common := commonHeaders(group)
		payload, err := packParts(group, common)
		if err != nil {
			return nil, fmt.Errorf("outbox: packing %d messages of key %q: %w", len(group), m.Key, err)
		}
		common[HeaderPacked] = strconv.Itoa(len(group))
		out = append(out, &driver.OutboxInsertParams{
			Category: m.Category, Transport: m.Transport, Topic: m.Topic, Key: m.Key, Type: TypePacked,
			MessageID: m.MessageID, Payload: payload, Headers: common, Packed: group,
		})
	}
	return out, nil
}

// commonHeaders returns the headers every message of group has, with the same value: the
// packed row carries them once, and each message only its own others.
func commonHeaders(group []*driver.OutboxInsertParams) map[string]string {
	common := map[string]string{}
	for k, v := range group[0].Headers {
		common[k] = v
	}
	for _, g := range group[1:] {
		for k, v := range common {
			if w, ok := g.Headers[k]; !ok || w != v {
				delete(common, k)
			}
		}
	}
	return common
}

// packParts writes the payload of a packed row: the JSON array of the messages' packedPart,
// each with the headers that are not among common. The payloads are copied as they are (they
// are JSON already; validating and compacting each again, as json.Marshal of a json.RawMessage
// would, costs more than the rest).
func packParts(group []*driver.OutboxInsertParams, common map[string]string) ([]byte, error) {
	size := 2
	for _, g := range group {
		size += len(g.Payload) + len(g.MessageID) + len(g.Type) + 64
		for k, v := range g.Headers {
			size += len(k) + len(v) + 6
		}
	}
	buf := make([]byte, 0, size)
	buf = append(buf, '[')
	for i, g := range group {
		if len(g.Payload) == 0 {
			return nil, fmt.Errorf("message %q has no payload", g.MessageID)
		}
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = jsonappend.String(append(buf, `{"id":`...), g.MessageID)
		buf = jsonappend.String(append(buf, `,"type":`...), g.Type)
		own := make(map[string]string, len(g.Headers))
		for k, v := range g.Headers {
			if _, shared := common[k]; !shared {
				own[k] = v
			}
		}
		if len(own) > 0 {
			buf = jsonappend.StringMap(append(buf, `,"headers":`...), own)
		}
		buf = append(append(append(buf, `,"payload":`...), g.Payload...), '}')
	}
	return append(buf, ']'), nil
}

// Unpack returns the messages rows carry, in order: a packed row's messages (see Pack) in its
// place, each a copy of the row with the message's id, type, headers and payload, and any other
// row as it is. Read the outbox through it when you read it yourself.
func Unpack(rows []*driver.OutboxRow) ([]*driver.OutboxRow, error) {
	msgs, _, bad := unpack(rows)
	for i := range rows {
		if err := bad[i]; err != nil {
			return nil, fmt.Errorf("outbox row %d: %w", rows[i].ID, err)
		}
	}
	return msgs, nil
}

// unpack returns the messages of rows to publish: a packed row's messages in its place (each a
// copy of the row with the message's id, type, headers and payload), any other row as it is.
// owner[i] is the index in rows of the i-th message. A packed row whose payload does not decode
// publishes nothing and has its error in bad.
func unpack(rows []*driver.OutboxRow) (msgs []*driver.OutboxRow, owner []int, bad map[int]error) {
	msgs, owner = make([]*driver.OutboxRow, 0, len(rows)), make([]int, 0, len(rows))
	for i, row := range rows {
		if row.Type != TypePacked {
			msgs, owner = append(msgs, row), append(owner, i)
			continue
		}
		if row.Packed != nil { // handed over: the messages as written, nothing to parse
			for _, p := range row.Packed {
				m := *row
				m.MessageID, m.Type, m.Payload, m.Headers, m.Packed = p.MessageID, p.Type, p.Payload, p.Headers, nil
				msgs, owner = append(msgs, &m), append(owner, i)
			}
			continue
		}
		// A Decoder reads the array in one pass (json.Unmarshal scans it once to validate first).
		var parts []packedPart
		err := json.NewDecoder(bytes.NewReader(row.Payload)).Decode(&parts)
		if err == nil && len(parts) == 0 {
			err = errors.New("it holds no messages")
		}
		if err != nil {
			if bad == nil {
				bad = map[int]error{}
			}
			bad[i] = Permanent(fmt.Errorf("a packed outbox row that does not decode: %w", err))
			continue
		}
		for _, p := range parts {
			m := *row
			m.MessageID, m.Type, m.Payload = p.MessageID, p.Type, p.Payload
			// The row's headers are those all its messages share (and HeaderPacked).
			m.Headers = make(map[string]string, len(row.Headers)+len(p.Headers))
			for k, v := range row.Headers {
				if k != HeaderPacked {
					m.Headers[k] = v
				}
			}
			for k, v := range p.Headers {
				m.Headers[k] = v
			}
			msgs, owner = append(msgs, &m), append(owner, i)
		}
	}
	return msgs, owner, bad
}

// rowErrors folds the publisher's results of the messages of unpack back onto their rows: a
// row is published when all its messages were; otherwise its error is the first of them that is
// not ErrNotSent, or ErrNotSent when none was attempted. A packed row that failed in part is
// published again whole (consumers deduplicate by message id).
func rowErrors(n int, owner []int, errs []error, bad map[int]error) []error {
	out := make([]error, n)
	notSent := make([]bool, n)
	for i, row := range owner {
		err := errNoResult
		if i < len(errs) {
			err = errs[i]
		}
		switch {
		case err == nil:
		case errors.Is(err, ErrNotSent):
			notSent[row] = true
		case out[row] == nil:
			out[row] = err
		}
	}
	for row := range out {
		if out[row] == nil && notSent[row] {
			out[row] = ErrNotSent
		}
	}
	for row, err := range bad {
		out[row] = err
	}
	return out
}
