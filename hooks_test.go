package commandbus

import (
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus/internal/clienthook"
)

// hiddenClientMethods is the plumbing the module's own packages reach through internal/plumbing;
// none of it may come back as an exported Client method.
var hiddenClientMethods = []string{
	"Extension", "LookupExtension", "Subscribe", "DriverNow", "BuildCommand", "SendWithExecutor",
	"ExecuteDelivered", "DeliverReply", "Inbox", "MessagingMetrics", "AMQPDomains", "AMQP10Domains",
	"CommandTypes",
}

func TestClientHidesPlumbing(t *testing.T) {
	typ := reflect.TypeFor[*Client]()
	exported := map[string]bool{}
	for m := range typ.Methods() {
		exported[m.Name] = true
	}
	// The reflection sees the public API: these stay exported.
	for _, name := range []string{"Send", "Start", "Stop", "Driver", "Config", "AddService"} {
		require.True(t, exported[name], "Client.%s should be exported", name)
	}
	for _, name := range hiddenClientMethods {
		require.False(t, exported[name], "Client.%s is plumbing for the module's packages: keep it unexported (use internal/plumbing)", name)
	}
}

func TestClientHooksAreSet(t *testing.T) {
	hooks := map[string]any{
		"Extension": clienthook.Extension, "Subscribe": clienthook.Subscribe, "DriverNow": clienthook.DriverNow,
		"BuildCommand": clienthook.BuildCommand, "ExecuteDelivered": clienthook.ExecuteDelivered,
		"DeliverReply": clienthook.DeliverReply, "MessagingMetrics": clienthook.MessagingMetrics,
		"AMQPDomains": clienthook.AMQPDomains, "AMQP10Domains": clienthook.AMQP10Domains,
		"CommandTypes": clienthook.CommandTypes, "SignalLocal": clienthook.SignalLocal,
	}
	for name, hook := range hooks {
		require.False(t, reflect.ValueOf(hook).IsNil(), "clienthook.%s is not set by the root package's init", name)
	}
}
