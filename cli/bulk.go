package cli

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/commandbus/commandbus/driver"
)

// bulkFlags select the items of an action run over many (no ID argument) and say whether to act:
// --dry-run lists what would be done, --yes does it. Filters left empty do not filter.
type bulkFlags struct {
	domain, typ, tenant, errorCode, batch string
	olderThan                             time.Duration
	dryRun, yes                           bool

	batchID uuid.UUID // parsed from batch by check
}

// register adds the filters and --dry-run/--yes to an action command; noun names the items.
func (b *bulkFlags) register(cmd *cobra.Command, noun string) {
	f := cmd.Flags()
	f.StringVar(&b.domain, "domain", "", "without ID: only "+noun+" of this domain")
	f.StringVar(&b.typ, "type", "", "without ID: only "+noun+" of this type")
	f.StringVar(&b.tenant, "tenant", "", "without ID: only "+noun+" of this tenant")
	f.StringVar(&b.errorCode, "error-code", "", "without ID: only "+noun+" that failed with this error code")
	f.StringVar(&b.batch, "batch", "", "without ID: only "+noun+" of this batch id")
	f.DurationVar(&b.olderThan, "older-than", 0, "without ID: only "+noun+" parked longer ago than this (1h, 30m)")
	f.BoolVar(&b.dryRun, "dry-run", false, "list what would be done and change nothing")
	f.BoolVar(&b.yes, "yes", false, "without ID: act on every matching item (required to act on many)")
}

// filtered reports whether a filter flag was given.
func (b *bulkFlags) filtered() bool {
	return b.domain != "" || b.typ != "" || b.tenant != "" || b.errorCode != "" || b.batch != "" || b.olderThan != 0
}

// check validates the flags for a run with (single) or without an ID argument.
func (b *bulkFlags) check(single bool) error {
	if b.olderThan < 0 {
		return usageErrorf("--older-than must not be negative, got %s", b.olderThan)
	}
	if b.dryRun && b.yes {
		return usageErrorf("--dry-run and --yes contradict each other; give one")
	}
	if single {
		if b.filtered() {
			return usageErrorf("give an ID or filters (--domain, --type, --tenant, --error-code, --batch, --older-than), not both")
		}
		return nil
	}
	if !b.dryRun && !b.yes {
		return usageErrorf("without an ID the action applies to every matching item: pass --dry-run to list them or --yes to act")
	}
	if b.batch != "" {
		id, err := uuid.Parse(b.batch)
		if err != nil {
			return usageErrorf("--batch: %v", err)
		}
		b.batchID = id
	}
	return nil
}

// keep reports whether an item passes the filters the database query did not apply: error code
// and age (since is when it was parked or last changed).
func (b *bulkFlags) keep(errorCode string, since time.Time, now time.Time) bool {
	if b.errorCode != "" && errorCode != b.errorCode {
		return false
	}
	if b.olderThan > 0 && now.Sub(since) < b.olderThan {
		return false
	}
	return true
}

// bulkItem is one item of a run over many, as listed or acted on.
type bulkItem struct {
	ID        uuid.UUID `json:"id"`
	Domain    string    `json:"domain,omitempty"`
	Type      string    `json:"type"`
	ErrorCode string    `json:"errorCode,omitempty"`
	Since     time.Time `json:"since"`
	// Status is the item's status after the action (empty in a dry run or on failure).
	Status string `json:"status,omitempty"`
	// Error is why the action failed on this item.
	Error string `json:"error,omitempty"`
}

// bulkReport is what a run over many printed with -o json.
type bulkReport struct {
	Action  string      `json:"action"`
	DryRun  bool        `json:"dryRun"`
	Matched int         `json:"matched"`
	Done    int         `json:"done"`
	Failed  int         `json:"failed"`
	Items   []*bulkItem `json:"items"`
}

// progressEvery is how many items a long run acts on between two progress lines.
const progressEvery = 100

// runBulk applies act to every item (or, in a dry run, lists them), one audited action per item,
// and prints the outcome; progress goes to stderr on long runs. An item that fails does not stop
// the others; the run then ends with an error (exit code 1) naming how many failed.
func runBulk(cmd *cobra.Command, output *outputFlag, action string, dryRun bool, items []*bulkItem, act func(ctx context.Context, id uuid.UUID) (string, error)) error {
	format, err := output.get()
	if err != nil {
		return err
	}
	out, errOut := cmd.OutOrStdout(), cmd.ErrOrStderr()
	report := &bulkReport{Action: action, DryRun: dryRun, Matched: len(items), Items: items}
	if report.Items == nil {
		report.Items = []*bulkItem{}
	}
	table := format == OutputTable
	for i, it := range items {
		if dryRun {
			if table {
				fmt.Fprintf(out, "would %s %s\t%s\n", action, it.ID, describeItem(it))
			}
			continue
		}
		status, err := act(cmd.Context(), it.ID)
		if err != nil {
			it.Error = err.Error()
			report.Failed++
		} else {
			it.Status = status
			report.Done++
		}
		if table {
			if err != nil {
				fmt.Fprintf(out, "failed  %s\t%s: %v\n", it.ID, describeItem(it), err)
			} else {
				fmt.Fprintf(out, "%s %s\t%s, now %s\n", pastTense(action), it.ID, describeItem(it), status)
			}
		}
		if len(items) > progressEvery && (i+1)%progressEvery == 0 {
			fmt.Fprintf(errOut, "progress: %d/%d (%d failed)\n", i+1, len(items), report.Failed)
		}
		if cmd.Context().Err() != nil {
			break
		}
	}
	switch format {
	case OutputJSON:
		if err := WriteJSON(out, report); err != nil {
			return err
		}
	case OutputJSONL:
		if err := writeJSONLines(out, report.Items); err != nil {
			return err
		}
	default:
		printBulkSummary(out, report)
	}
	if report.Failed > 0 {
		return fmt.Errorf("%s failed on %d of %d items", action, report.Failed, report.Matched)
	}
	if err := cmd.Context().Err(); err != nil && !dryRun && report.Done < report.Matched {
		return fmt.Errorf("interrupted after %d of %d items: %w", report.Done, report.Matched, err)
	}
	return nil
}

func printBulkSummary(out io.Writer, r *bulkReport) {
	switch {
	case r.Matched == 0:
		fmt.Fprintln(out, "nothing matches")
	case r.DryRun:
		fmt.Fprintf(out, "%d would be %s; nothing changed (pass --yes to act)\n", r.Matched, pastTense(r.Action))
	default:
		fmt.Fprintf(out, "%d %s, %d failed, of %d matching\n", r.Done, pastTense(r.Action), r.Failed, r.Matched)
	}
}

func describeItem(it *bulkItem) string {
	return joinNonEmpty(" ", joinNonEmpty("/", it.Domain, it.Type), it.ErrorCode, "since "+it.Since.UTC().Format(time.RFC3339))
}

func pastTense(action string) string {
	switch action {
	case "retry":
		return "retried"
	case "cancel":
		return "cancelled"
	case "skip":
		return "skipped"
	case "resubmit":
		return "resubmitted"
	case "complete", "resume":
		return action + "d"
	}
	return action + "ed"
}

// bulkPage is how many rows one query of a selection reads.
const bulkPage = 500

// selectCommands pages through the commands in the troubleshooting queue that match b.
func selectCommands(ctx context.Context, exec driver.Executor, b *bulkFlags, now time.Time) ([]*bulkItem, error) {
	var items []*bulkItem
	params := &driver.CommandListParams{Statuses: []driver.CommandStatus{driver.CommandStatusInTSQ},
		Domain: b.domain, Type: b.typ, TenantID: b.tenant, BatchID: b.batchID, Limit: bulkPage}
	for {
		rows, err := exec.CommandList(ctx, params)
		if err != nil {
			return nil, err
		}
		for _, r := range rows {
			since := r.UpdatedAt
			if r.ParkedAt != nil {
				since = *r.ParkedAt
			}
			if b.keep(r.ErrorCode, since, now) {
				items = append(items, &bulkItem{ID: r.ID, Domain: r.Domain, Type: r.Type, ErrorCode: r.ErrorCode, Since: since})
			}
		}
		if len(rows) < bulkPage {
			return items, nil
		}
		params.BeforeID = rows[len(rows)-1].ID
	}
}

// selectExecutions pages through the executions of the given statuses (and model, when set)
// that match b.
func selectExecutions(ctx context.Context, exec driver.Executor, b *bulkFlags, model string, statuses []driver.ExecutionStatus, now time.Time) ([]*bulkItem, error) {
	var items []*bulkItem
	params := &driver.ExecutionListParams{Statuses: statuses, Model: model, Type: b.typ, Domain: b.domain,
		TenantID: b.tenant, BatchID: b.batchID, Limit: bulkPage}
	for {
		rows, err := exec.ExecutionList(ctx, params)
		if err != nil {
			return nil, err
		}
		for _, r := range rows {
			if b.keep(r.ErrorCode, r.UpdatedAt, now) {
				items = append(items, &bulkItem{ID: r.ID, Domain: r.Domain, Type: r.Type, ErrorCode: r.ErrorCode, Since: r.UpdatedAt})
			}
		}
		if len(rows) < bulkPage {
			return items, nil
		}
		params.BeforeID = rows[len(rows)-1].ID
	}
}

// selectDLQ lists the parked commands that match b, reading every page of the dead-letter queue
// (pageSize entries a query).
func selectDLQ(ctx context.Context, exec driver.Executor, b *bulkFlags, now time.Time, pageSize int) ([]*bulkItem, error) {
	params := &driver.DLQListParams{Domain: b.domain, Type: b.typ, TenantID: b.tenant, Limit: pageSize}
	var items []*bulkItem
	for {
		rows, err := exec.DLQList(ctx, params)
		if err != nil {
			return nil, err
		}
		for _, r := range rows {
			it := &bulkItem{ID: r.CommandID, Since: r.ParkedAt}
			if c := r.Command; c != nil {
				if b.batchID != uuid.Nil && c.BatchID != b.batchID {
					continue
				}
				it.Domain, it.Type, it.ErrorCode = c.Domain, c.Type, c.ErrorCode
			} else if b.batchID != uuid.Nil {
				continue
			}
			if b.keep(it.ErrorCode, it.Since, now) {
				items = append(items, it)
			}
		}
		if len(rows) < params.Limit {
			return items, nil
		}
		last := rows[len(rows)-1]
		params.After = &driver.DLQCursor{ParkedAt: last.ParkedAt, CommandID: last.CommandID}
	}
}

// listFlags are --limit and --all of a listing.
type listFlags struct {
	limit int
	all   bool
}

func (l *listFlags) register(cmd *cobra.Command, def int) {
	cmd.Flags().IntVar(&l.limit, "limit", def, "most rows to show (1 to 1000); more are read page by page with --all")
	cmd.Flags().BoolVar(&l.all, "all", false, "show every matching row, following pages")
}

func (l *listFlags) check() error {
	if l.limit < 1 || l.limit > 1000 {
		return usageErrorf("--limit must be between 1 and 1000, got %d", l.limit)
	}
	return nil
}

// readPages reads rows a page at a time through read (given the id to read before and a page
// size), newest first: every row with --all, else at most --limit, warning on stderr when more
// match.
func readPages[T any](cmd *cobra.Command, l *listFlags, id func(T) uuid.UUID, read func(before uuid.UUID, limit int) ([]T, error)) ([]T, error) {
	return readPagesAfter(cmd, l, id, read)
}

// readPagesAfter is readPages for a list whose position is any key: read gets the key of the
// last row of the previous page (K's zero value for the first page).
func readPagesAfter[T, K any](cmd *cobra.Command, l *listFlags, key func(T) K, read func(after K, limit int) ([]T, error)) ([]T, error) {
	var out []T
	var after K
	for {
		size := l.limit
		if !l.all {
			size = l.limit - len(out)
		}
		rows, err := read(after, size+1)
		if err != nil {
			return nil, err
		}
		more := len(rows) > size
		if more {
			rows = rows[:size]
		}
		out = append(out, rows...)
		if !more {
			return out, nil
		}
		if !l.all {
			fmt.Fprintf(cmd.ErrOrStderr(), "more than %d rows match: showing the first %d in the listing's order (--all for every one)\n", len(out), len(out))
			return out, nil
		}
		after = key(rows[len(rows)-1])
	}
}
