package main

import (
	"go/version"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestReleaseBinaryHasNoTestModules builds the binary as a release would and reads the modules
// linked into it (go version -m): test doubles such as kfake must not be among them. A build with
// -tags kfake carries it, which shows the test looks at the right thing.
func TestReleaseBinaryHasNoTestModules(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the binary")
	}
	modules := func(tags ...string) string {
		bin := filepath.Join(t.TempDir(), "commandbus")
		args := append([]string{"build", "-o", bin}, tags...)
		build := exec.Command("go", append(args, ".")...)
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		out, err := build.CombinedOutput()
		require.NoError(t, err, "go build: %s", out)
		out, err = exec.Command("go", "version", "-m", bin).CombinedOutput()
		require.NoError(t, err, "go version -m: %s", out)
		return string(out)
	}
	release := modules()
	require.Contains(t, release, "github.com/jackc/pgx/v5", "go version -m lists the linked modules:\n%s", release)
	for _, testOnly := range []string{"github.com/twmb/franz-go/pkg/kfake", "github.com/stretchr/testify", "github.com/chromedp/chromedp"} {
		require.NotContains(t, release, testOnly, "the release binary links a test-only module")
	}
	tagged := modules("-tags", "kfake")
	require.True(t, strings.Contains(tagged, "github.com/twmb/franz-go/pkg/kfake"), "a -tags kfake build carries the in-process Kafka:\n%s", tagged)
}

// TestGoModDeclaresTheLowestGoVersion checks go.mod's go line: not a patch release (x.y.0), and
// no higher than the highest go line among the modules it requires, so importers are not made to
// upgrade for nothing. (The code itself compiles at the declared version: the compiler enforces
// the go line's language version and vet's stdversion check its standard library.)
func TestGoModDeclaresTheLowestGoVersion(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-m", "-f", "{{if .Main}}main {{end}}{{.GoVersion}}", "all").CombinedOutput()
	require.NoError(t, err, "go list -m: %s", out)
	var own, highest string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if v, ok := strings.CutPrefix(line, "main "); ok {
			own = v
			continue
		}
		if line != "" && version.Compare("go"+line, "go"+highest) > 0 {
			highest = line
		}
	}
	require.NotEmpty(t, own)
	require.Equal(t, version.Lang("go"+own)+".0", "go"+own, "go.mod's go line names a patch release")
	require.LessOrEqual(t, version.Compare("go"+own, "go"+highest), 0,
		"go.mod says go %s but no dependency needs more than go %s", own, highest)
}
