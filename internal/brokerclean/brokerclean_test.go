package brokerclean_test

import (
	"crypto/rand"
	"encoding/hex"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus/internal/brokerclean"
	"github.com/commandbus/commandbus/internal/rabbittest"
	"github.com/commandbus/commandbus/transport/amqp"
)

// The queues a topology declares under a tracked prefix, the implicit dead-letter, parking and
// backout queues included, are gone from the broker once the test that tracked it ends.
func TestTrackDeletesDeclaredQueues(t *testing.T) {
	url, conn := rabbittest.Dial(t)
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	topology := amqp.Topology{Prefix: "BC" + hex.EncodeToString(b)}
	work := topology.Prefix + ".CMD.fx.BookFx.Q"
	names := []string{topology.DeadLetterQueue(), topology.ParkingQueue(), work, topology.BackoutQueue(work)}
	exists := func(name string) bool {
		ch, err := conn.Channel()
		require.NoError(t, err)
		_, err = ch.QueueDeclarePassive(name, true, false, false, false, nil)
		if err == nil {
			_ = ch.Close()
		}
		return err == nil
	}
	t.Run("declares", func(t *testing.T) {
		brokerclean.Track(t, url, topology.Prefix)
		ch, err := conn.Channel()
		require.NoError(t, err)
		defer ch.Close()
		require.NoError(t, topology.DeclareDeadEnds(ch))
		require.NoError(t, topology.DeclareWorkQueue(ch, work))
		for _, name := range names {
			require.True(t, exists(name), name)
		}
	})
	for _, name := range names {
		require.False(t, exists(name), "%s is left on the broker", name)
	}
	require.NoError(t, brokerclean.Sweep(), "sweeping what is already gone")
}
