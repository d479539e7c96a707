package commandbus

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/dbtest"
)

func TestOperatorActionValidate(t *testing.T) {
	t.Parallel()
	fields := func(err error) []string {
		var out []string
		for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
			var v *ValidationError
			require.True(t, errors.As(e, &v))
			out = append(out, v.Field)
		}
		return out
	}
	require.NoError(t, OperatorAction{Actor: "alice@ops", Reason: "downstream fixed\nsee INC-42"}.Validate())
	require.NoError(t, OperatorAction{Actor: "alice@ops", Reason: strings.Repeat("é", MaxReasonLength)}.Validate(), "the cap counts characters")
	require.Equal(t, []string{"actor", "reason"}, fields(OperatorAction{}.Validate()), "every problem at once")
	require.Equal(t, []string{"reason"}, fields(OperatorAction{Actor: "a", Reason: strings.Repeat("r", MaxReasonLength+1)}.Validate()))
	require.Equal(t, []string{"reason"}, fields(OperatorAction{Actor: "a", Reason: "ok\x00"}.Validate()))
	require.Equal(t, []string{"actor"}, fields(OperatorAction{Actor: "a\nb", Reason: "ok"}.Validate()))
	err := OperatorAction{Actor: "a", Reason: strings.Repeat("r", 1<<20)}.Validate()
	require.Less(t, len(err.Error()), 200, "the error does not repeat the reason")
}

// An oversized reason is refused by the troubleshooting queue itself and changes nothing.
func TestTSQRefusesOversizedReason(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		handlers := NewHandlers()
		AddHandler(handlers, "fx", HandlerFunc[testArgs](func(ctx context.Context, cmd *Command[testArgs]) (any, error) {
			return nil, Permanent("DOWNSTREAM_REJECTED", errors.New("rejected"))
		}))
		client := newTestClient(t, drv, &Config{Handlers: handlers})
		startClient(t, client)
		ctx := context.Background()
		res, err := client.Send(ctx, "fx", testArgs{}, nil)
		require.NoError(t, err)
		waitStatus(t, client, res.ID, StatusInTSQ)
		_, err = client.TSQ().Cancel(ctx, res.ID, OperatorAction{Actor: "alice@ops", Reason: strings.Repeat("r", 1<<20)})
		var verr *ValidationError
		require.ErrorAs(t, err, &verr)
		require.Equal(t, "reason", verr.Field)
		row, err := client.GetCommand(ctx, res.ID)
		require.NoError(t, err)
		require.Equal(t, StatusInTSQ, row.Status)
		for _, a := range row.Audit {
			require.Less(t, len(a.Reason), 1000)
		}
	})
}
