package commandbus

import (
	"encoding/json"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

func TestEncodeReplyMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	for _, r := range []Reply{
		{CommandID: uuid.New(), Domain: "fx", CommandType: "BookFx", Outcome: OutcomeSuccess},
		{CommandID: uuid.New(), CorrelationID: uuid.New(), Domain: "fx", CommandType: "BookFx", Outcome: OutcomeFailed,
			Result: json.RawMessage(`{"a":[1,2]}`), ErrorCode: "E", ErrorMessage: "quote \" backslash \\ <html> & \n\t\r \x01 \u2028 é 😀 \xff",
			Headers: map[string]string{"b": "2", "a": "1<", "trace\"id": "x"}},
	} {
		want, err := json.Marshal(r)
		require.NoError(t, err)
		require.Equal(t, string(want), string(encodeReply(&r)))
	}
}
