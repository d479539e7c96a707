package cli

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

// BuildInfo is what a binary knows of its own build, from the Go toolchain's build information
// (runtime/debug.ReadBuildInfo): the module version `go install` stamped (or "(devel)" for a
// local build), the VCS commit and its time when built from a checkout, the Go version and the
// platform.
type BuildInfo struct {
	Module     string `json:"module"`
	Version    string `json:"version"`
	Commit     string `json:"commit,omitempty"`
	CommitTime string `json:"commitTime,omitempty"`
	// Modified is true when the checkout had uncommitted changes.
	Modified  bool   `json:"modified,omitempty"`
	GoVersion string `json:"goVersion"`
	Platform  string `json:"platform"`
}

// readBuildInfo is the toolchain's build information; tests replace it.
var readBuildInfo = debug.ReadBuildInfo

// ReadBuildInfo returns the running binary's build information.
func ReadBuildInfo() BuildInfo {
	out := BuildInfo{Version: "(unknown)", GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	info, ok := readBuildInfo()
	if !ok {
		return out
	}
	out.Module, out.GoVersion = info.Main.Path, info.GoVersion
	if info.Main.Version != "" {
		out.Version = info.Main.Version
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			out.Commit = s.Value
		case "vcs.time":
			out.CommitTime = s.Value
		case "vcs.modified":
			out.Modified = s.Value == "true"
		}
	}
	return out
}

// String is the build on one line: "v1.4.0 (commit 1a2b3c4d5e6f, 2026-11-26T09:00:00Z, go1.26.8, linux/amd64)".
func (b BuildInfo) String() string {
	var parts []string
	if b.Commit != "" {
		commit := "commit " + b.Commit[:min(12, len(b.Commit))]
		if b.Modified {
			commit += " with local changes"
		}
		parts = append(parts, commit)
	}
	parts = append(parts, joinNonEmpty(", ", b.CommitTime, b.GoVersion, b.Platform))
	return b.Version + " (" + strings.Join(parts, ", ") + ")"
}

// VersionTemplate is a cobra version template that prints the binary's name and build, for a
// root command's --version: root.Version = "set"; root.SetVersionTemplate(cli.VersionTemplate()).
func VersionTemplate() string {
	return "{{.Name}} " + ReadBuildInfo().String() + "\n"
}

func newVersionCommand() *cobra.Command {
	var out outputFlag
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the binary's version, commit, Go version and platform",
		Long:  "version prints the build information the Go toolchain recorded in the binary: the module version, the\nVCS commit and its time, whether the checkout had local changes, the Go version and the platform.",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			info := ReadBuildInfo()
			if out.structured() {
				return out.writeOne(cmd.OutOrStdout(), info)
			}
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "%s %s\n", cmd.Root().Name(), info)
			return err
		},
	}
	out.register(cmd)
	return cmd
}
