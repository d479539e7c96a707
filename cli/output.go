package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"os/user"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
)

// defaultActor is the audited actor of an operator action when --actor is not given: cli:USER.
func defaultActor() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return "cli:" + u.Username
	}
	return "cli"
}

// The output formats of -o/--output.
const (
	OutputTable = "table" // aligned columns for a person (the default)
	OutputJSON  = "json"  // one indented JSON document: an array for a listing, [] when empty
	OutputJSONL = "jsonl" // one compact JSON value per line, nothing for an empty listing
)

// outputFormat is the value of -o/--output, checked when the flag is parsed.
type outputFormat string

func (f *outputFormat) String() string { return string(*f) }

// Set accepts table, json or jsonl.
func (f *outputFormat) Set(v string) error {
	switch v {
	case OutputTable, OutputJSON, OutputJSONL:
		*f = outputFormat(v)
		return nil
	}
	return fmt.Errorf("want table, json or jsonl, got %q", v)
}

// Type names the value in --help.
func (f *outputFormat) Type() string { return "format" }

// outputFlag is a command's -o/--output, with --json kept as the older spelling of -o json.
type outputFlag struct {
	format outputFormat
	asJSON bool
	cmd    *cobra.Command
}

func (o *outputFlag) register(cmd *cobra.Command) {
	o.cmd, o.format = cmd, OutputTable
	cmd.Flags().VarP(&o.format, "output", "o", "output format: table, json or jsonl (one JSON value per line)")
	cmd.Flags().BoolVar(&o.asJSON, "json", false, "print JSON (the same as -o json)")
}

// get is the chosen format; --json with another -o is a usage error.
func (o *outputFlag) get() (string, error) {
	if o.asJSON {
		if o.cmd != nil && o.cmd.Flags().Changed("output") && o.format != OutputJSON {
			return "", fmt.Errorf("--json and -o %s contradict each other; give one", o.format)
		}
		return OutputJSON, nil
	}
	return string(o.format), nil
}

// structured reports json or jsonl (a bad combination is reported by writeOne or writeList).
func (o *outputFlag) structured() bool {
	f, err := o.get()
	return err != nil || f != OutputTable
}

// writeOne prints one value as JSON (indented) or JSONL (one line).
func (o *outputFlag) writeOne(out io.Writer, v any) error {
	f, err := o.get()
	if err != nil {
		return err
	}
	if f == OutputJSONL {
		return json.NewEncoder(out).Encode(v)
	}
	return WriteJSON(out, v)
}

// writeList prints rows in the chosen format: a table (header is tab-separated and line formats
// one row the same way; empty is said instead when there are none), a JSON array ([] when
// empty, never null), or one JSON line per row.
func writeList[T any](out io.Writer, o *outputFlag, rows []T, empty, header string, line func(T) string) error {
	format, err := o.get()
	if err != nil {
		return err
	}
	switch format {
	case OutputJSON:
		if rows == nil {
			rows = []T{}
		}
		return WriteJSON(out, rows)
	case OutputJSONL:
		enc := json.NewEncoder(out)
		for _, r := range rows {
			if err := enc.Encode(r); err != nil {
				return err
			}
		}
		return nil
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
