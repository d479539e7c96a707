package commandbus

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// Classify is the one classification of every model: the same error gets the same class and
// code everywhere, and only the class of an unclassified error is the model's choice.
func TestClassify(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		err   error
		class ErrorClass // for both defaults
		code  string
	}{
		{"business", fmt.Errorf("wrapped: %w", BusinessRule("INSUFFICIENT_FUNDS", "short by 10")), ClassBusiness, "INSUFFICIENT_FUNDS"},
		{"permanent", Permanent("BAD_IBAN", errors.New("checksum")), ClassPermanent, "BAD_IBAN"},
		{"transient", &TransientError{Code: "BANK_DOWN", Err: errors.New("503")}, ClassTransient, "BANK_DOWN"},
		{"timeout", fmt.Errorf("calling: %w", context.DeadlineExceeded), ClassTransient, ""},
		{"invalid data", &Error{Code: CodeInvalidData, Message: "not JSON"}, ClassPermanent, CodeInvalidData},
		{"unknown type", ErrUnknownCommandType, ClassPermanent, CodeUnknownCommandType},
	} {
		for _, def := range []ErrorClass{ClassTransient, ClassPermanent} {
			class, code := Classify(tc.err, def)
			require.Equal(t, tc.class, class, "%s with unclassified %s", tc.name, def)
			require.Equal(t, tc.code, code, tc.name)
		}
	}
	plain := errors.New("connection reset")
	class, code := Classify(plain, ClassTransient)
	require.Equal(t, ClassTransient, class)
	require.Empty(t, code)
	class, _ = Classify(plain, ClassPermanent)
	require.Equal(t, ClassPermanent, class, "an unclassified error takes the model's default")
	class, code = Classify(&Error{Code: CodeRetriesExhausted}, ClassPermanent)
	require.Equal(t, ClassPermanent, class)
	require.Equal(t, CodeRetriesExhausted, code, "a coded error keeps its code whatever its class")

	// The command bus's view: unclassified is transient, and each class has its default code.
	c, code, msg := classify(plain)
	require.Equal(t, ClassTransient, c)
	require.Equal(t, CodeTransientFailure, code)
	require.Equal(t, "connection reset", msg)
	_, code, msg = classify(Permanent("", errors.New("bug")))
	require.Equal(t, CodePermanentFailure, code)
	require.Equal(t, "bug", msg)
	_, code, _ = classify(&BusinessRuleError{Message: "no"})
	require.Equal(t, CodeBusinessRule, code)
	require.Equal(t, "PERMANENT", ClassPermanent.String())
	require.Equal(t, "BUSINESS", ClassBusiness.String())
}
