package outbox_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus/outbox"
)

const validEnvelope = `{
  "messageId": "0190b8a4-0000-7000-8000-000000000001",
  "type": "CommandRequested",
  "name": "SubmitPayment",
  "commandId": "0190b8a4-0000-7000-8000-000000000002",
  "correlationId": "0190b8a4-0000-7000-8000-000000000003",
  "causationId": "0190b8a4-0000-7000-8000-000000000004",
  "occurredAt": "2025-11-02T12:34:56Z",
  "key": "payment-1",
  "headers": {
    "replyTo": "APP.CMD.REPLY.Q",
    "tenantId": "acme",
    "schemaVersion": "1",
    "idempotencyKey": "saga-1:STEP_SUBMIT_PAYMENT",
    "traceId": "4bf92f3577b34da6a3ce929d0e0e4736",
    "spanId": "00f067aa0ba902b7"
  },
  "payload": {"paymentId": "p-1", "amount": {"currency": "USD", "value": "100.00"}}
}`

func TestDecode(t *testing.T) {
	t.Parallel()
	e, err := outbox.Decode([]byte(validEnvelope))
	require.NoError(t, err)
	require.Equal(t, uuid.MustParse("0190b8a4-0000-7000-8000-000000000001"), e.MessageID)
	require.Equal(t, outbox.TypeCommandRequested, e.Type)
	require.Equal(t, "SubmitPayment", e.Name)
	require.Equal(t, uuid.MustParse("0190b8a4-0000-7000-8000-000000000003"), e.CorrelationID)
	require.True(t, e.OccurredAt.Equal(time.Date(2025, 11, 2, 12, 34, 56, 0, time.UTC)))
	require.Equal(t, "payment-1", e.Key)
	require.Equal(t, outbox.Headers{ReplyTo: "APP.CMD.REPLY.Q", TenantID: "acme", SchemaVersion: "1",
		IdempotencyKey: "saga-1:STEP_SUBMIT_PAYMENT", TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", SpanID: "00f067aa0ba902b7"}, e.Headers)
	require.JSONEq(t, `{"paymentId": "p-1", "amount": {"currency": "USD", "value": "100.00"}}`, string(e.Payload))
	sc, ok := e.Headers.Trace()
	require.True(t, ok)
	require.Equal(t, "4bf92f3577b34da6a3ce929d0e0e4736", sc.TraceID.String())

	encoded, err := e.Encode()
	require.NoError(t, err)
	again, err := outbox.Decode(encoded)
	require.NoError(t, err)
	require.Equal(t, e, again)

	// The payload as a string holding JSON, the other form the decoder accepts.
	stringForm := strings.Replace(validEnvelope, `{"paymentId": "p-1", "amount": {"currency": "USD", "value": "100.00"}}`, `"{\"paymentId\":\"p-1\"}"`, 1)
	e, err = outbox.Decode([]byte(stringForm))
	require.NoError(t, err)
	require.JSONEq(t, `{"paymentId":"p-1"}`, string(e.Payload))
}

func TestDecodeRejects(t *testing.T) {
	t.Parallel()
	replace := func(old, new string) string {
		require.Contains(t, validEnvelope, old)
		return strings.Replace(validEnvelope, old, new, 1)
	}
	for name, tc := range map[string]struct {
		data  string
		field string
	}{
		"not JSON":           {`{"messageId":`, ""},
		"array":              {`[]`, ""},
		"trailing data":      {validEnvelope + `{}`, ""},
		"unknown field":      {replace(`"key": "payment-1",`, `"key": "payment-1", "extra": 1,`), ""},
		"unknown type":       {replace(`"CommandRequested"`, `"CommandExploded"`), "type"},
		"no name":            {replace(`"name": "SubmitPayment",`, ``), "name"},
		"bad message id":     {replace(`"0190b8a4-0000-7000-8000-000000000001"`, `"42"`), "messageId"},
		"braced uuid":        {replace(`"0190b8a4-0000-7000-8000-000000000002"`, `"{0190b8a4-0000-7000-8000-000000000002}"`), "commandId"},
		"no command id":      {replace(`"commandId": "0190b8a4-0000-7000-8000-000000000002",`, ``), "commandId"},
		"bad correlation id": {replace(`"0190b8a4-0000-7000-8000-000000000003"`, `"x"`), "correlationId"},
		"bad time":           {replace(`"2025-11-02T12:34:56Z"`, `"yesterday"`), "occurredAt"},
		"no headers":         {`{"messageId":"0190b8a4-0000-7000-8000-000000000001","type":"CommandRequested","name":"A","commandId":"0190b8a4-0000-7000-8000-000000000002","occurredAt":"2025-11-02T12:34:56Z","payload":{}}`, "headers"},
		"no schema version":  {replace(`"schemaVersion": "1",`, ``), "headers.schemaVersion"},
		"bad trace id":       {replace(`"4bf92f3577b34da6a3ce929d0e0e4736"`, `"XYZ"`), "headers.traceId"},
		"payload not object": {replace(`{"paymentId": "p-1", "amount": {"currency": "USD", "value": "100.00"}}`, `[1]`), "payload"},
		"payload string":     {replace(`{"paymentId": "p-1", "amount": {"currency": "USD", "value": "100.00"}}`, `"not json"`), "payload"},
		"null payload":       {replace(`{"paymentId": "p-1", "amount": {"currency": "USD", "value": "100.00"}}`, `null`), "payload"},
	} {
		_, err := outbox.Decode([]byte(tc.data))
		require.ErrorIs(t, err, outbox.ErrInvalidEnvelope, name)
		require.NotErrorIs(t, err, outbox.ErrUnknownSchemaVersion, name)
		var decodeErr *outbox.DecodeError
		require.ErrorAs(t, err, &decodeErr)
		require.Equal(t, tc.field, decodeErr.Field, name)
	}

	// A newer version is parked, whatever fields it adds.
	_, err := outbox.Decode([]byte(strings.Replace(validEnvelope, `"schemaVersion": "1",`, `"schemaVersion": "2", "new": true,`, 1)))
	require.ErrorIs(t, err, outbox.ErrUnknownSchemaVersion)
	require.Contains(t, err.Error(), `"2"`)
}

// FuzzDecode checks that Decode never panics, and that whatever it accepts encodes to an
// envelope it reads back identically.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(validEnvelope))
	f.Add([]byte(strings.Replace(validEnvelope, `"schemaVersion": "1"`, `"schemaVersion": "7"`, 1)))
	f.Add([]byte(`{"messageId":"0190b8a4-0000-7000-8000-000000000001","type":"CommandTimedOut","name":"A","commandId":"0190b8a4-0000-7000-8000-000000000002","occurredAt":"2025-11-02T12:34:56.123456789+02:00","headers":{"schemaVersion":"1"},"payload":"{}"}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := outbox.Decode(data)
		if err != nil {
			var decodeErr *outbox.DecodeError
			if !errors.As(err, &decodeErr) {
				t.Fatalf("error is not a *DecodeError: %T %v", err, err)
			}
			return
		}
		encoded, err := e.Encode()
		if err != nil {
			t.Fatalf("accepted envelope does not encode: %v", err)
		}
		again, err := outbox.Decode(encoded)
		if err != nil {
			t.Fatalf("encoded envelope does not decode: %v\n%s", err, encoded)
		}
		reencoded, err := again.Encode()
		if err != nil {
			t.Fatal(err)
		}
		if string(encoded) != string(reencoded) {
			t.Fatalf("round trip changed the envelope:\n%s\n%s", encoded, reencoded)
		}
		if !json.Valid(encoded) {
			t.Fatalf("invalid JSON: %s", encoded)
		}
	})
}
