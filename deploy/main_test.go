package deploy_test

import (
	"os"
	"path/filepath"
	"testing"
)

// TestMain removes the binary commandbusBinary built for the package's tests.
func TestMain(m *testing.M) {
	code := m.Run()
	if binaryPath != "" {
		_ = os.RemoveAll(filepath.Dir(binaryPath))
	}
	os.Exit(code)
}
