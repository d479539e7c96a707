package cli

import (
	"io"
	"log/slog"
	"strings"

	"github.com/spf13/cobra"
)

// The values of --log-format.
const (
	LogFormatText = "text" // key=value lines, for a terminal
	LogFormatJSON = "json" // one JSON object per line, for a log pipeline
)

// addLogFlags adds --log-level and --log-format to root, for every command under it. Empty
// values leave each command its own default (serve and worker: info as JSON; the tools: quieter
// text).
func addLogFlags(root *cobra.Command) {
	if root.PersistentFlags().Lookup("log-level") != nil {
		return
	}
	root.PersistentFlags().String("log-level", "", "debug, info, warn or error (default: the command's own; info for serve and worker)")
	root.PersistentFlags().String("log-format", "", "text or json (default: json for serve and worker, text otherwise)")
}

// LogOptions are a command's defaults for Logger.
type LogOptions struct {
	Level  slog.Level // used when --log-level is not given
	Format string     // LogFormatText or LogFormatJSON, used when --log-format is not given
}

// Logger returns the logger cmd's --log-level and --log-format ask for, writing to w; what is not
// given comes from def. A value it does not know is a usage error naming the flag.
func Logger(cmd *cobra.Command, w io.Writer, def LogOptions) (*slog.Logger, error) {
	level, format := def.Level, def.Format
	if v := flagValue(cmd, "log-level"); v != "" {
		if err := level.UnmarshalText([]byte(v)); err != nil {
			return nil, usageErrorf("--log-level must be debug, info, warn or error, got %q", v)
		}
	}
	if v := flagValue(cmd, "log-format"); v != "" {
		format = strings.ToLower(v)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch format {
	case LogFormatJSON:
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	case LogFormatText, "":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	}
	return nil, usageErrorf("--log-format must be text or json, got %q", format)
}

// LogLevelGiven reports whether --log-level was given to cmd.
func LogLevelGiven(cmd *cobra.Command) bool { return flagValue(cmd, "log-level") != "" }

// flagValue is the value of the flag name on cmd (local or inherited), "" when it has none.
func flagValue(cmd *cobra.Command, name string) string {
	if cmd == nil {
		return ""
	}
	if f := cmd.Flags().Lookup(name); f != nil {
		return f.Value.String()
	}
	if f := cmd.InheritedFlags().Lookup(name); f != nil {
		return f.Value.String()
	}
	return ""
}
