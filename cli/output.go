package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"os/user"
	"strings"
	"text/tabwriter"
)

// defaultActor is the audited actor of an operator action when --actor is not given: cli:USER.
func defaultActor() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return "cli:" + u.Username
	}
	return "cli"
}

// writeList prints rows as JSON, as a note when there are none, or as a
// table: header is tab-separated and line formats one row the same way.
func writeList[T any](out io.Writer, asJSON bool, rows []T, empty, header string, line func(T) string) error {
	if asJSON {
		return WriteJSON(out, rows)
	}
	if len(rows) == 0 {
		fmt.Fprintln(out, empty)
		return nil
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, header)
	for _, r := range rows {
		fmt.Fprintln(tw, line(r))
	}
	return tw.Flush()
}

// WriteJSON prints v as indented JSON followed by a newline, as every --json flag does.
func WriteJSON(out io.Writer, v any) error {
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// truncate cuts s to n bytes, the last one an ellipsis, for table cells.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "…"
}

// joinNonEmpty joins the parts that are not empty with sep.
func joinNonEmpty(sep string, parts ...string) string {
	var kept []string
	for _, p := range parts {
		if p != "" {
			kept = append(kept, p)
		}
	}
	return strings.Join(kept, sep)
}
