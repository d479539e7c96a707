//go:build unix

package brokerlock

import (
	"os"
	"sync"
	"syscall"
	"testing"
)

func lock(tb testing.TB, exclusive bool) func() {
	f, err := os.OpenFile(path(), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		tb.Logf("brokerlock: %v; running unlocked", err)
		return func() {}
	}
	how := syscall.LOCK_SH
	if exclusive {
		how = syscall.LOCK_EX
	}
	if err := syscall.Flock(int(f.Fd()), how); err != nil {
		_ = f.Close()
		tb.Logf("brokerlock: %v; running unlocked", err)
		return func() {}
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
			_ = f.Close()
		})
	}
}
