package console

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/commandbus/commandbus"
)

// The dead-letter page lists the record written when each command was parked (command_dlq):
// when, by whom, after how many attempts and with which error, beside the business item it concerns.
// Resubmitting puts the command back on its queue with a fresh attempt budget and the same
// idempotency key, audited like every action.

// dlqRow is a dead-letter record with the business item and process its command belongs to.
type dlqRow struct {
	*commandbus.DLQEntry
	Context *itemContext
	// ErrorCode and ErrorMessage split the record's error ("CODE: message").
	ErrorCode, ErrorMessage string
}

type dlqData struct {
	Filter tsqFilter
	Rows   []*dlqRow
	Counts tsqCounts
	// Next is the link to the older records (empty on the last page); First, to the newest
	// (empty on the first page).
	Next, First string
	// Problem says why the page's parameters (its marker or size) cannot be read.
	Problem string
	// Broker is the broker's dead-letter queues (nil when the console has no reader).
	Broker *brokerSection
}

// dlqPageMarker is the "before" parameter of the dead-letter page: the record the page resumes
// after, by the list's order (parked at, in Unix microseconds, then command id).
func dlqPageMarker(e *commandbus.DLQEntry) string {
	return strconv.FormatInt(e.ParkedAt.UnixMicro(), 10) + "_" + e.CommandID.String()
}

// parseDLQPageMarker reads a marker made by dlqPageMarker.
func parseDLQPageMarker(v string) (*commandbus.DLQCursor, bool) {
	at, id, ok := strings.Cut(v, "_")
	micros, err := strconv.ParseInt(at, 10, 64)
	commandID, idErr := uuid.Parse(id)
	if !ok || err != nil || idErr != nil {
		return nil, false
	}
	return &commandbus.DLQCursor{ParkedAt: time.UnixMicro(micros).UTC(), CommandID: commandID}, true
}

// dlq lists the dead-letter records, most recently parked first, a page at a time: ?limit=N
// records (1 to tsqLimit, default tsqLimit), ?before=MARKER the records after the last one of the
// previous page.
func (c *Console) dlq(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	f := filterOf(r)
	d := dlqData{Filter: f}
	status := http.StatusOK
	query := r.URL.Query()
	pageSize := tsqLimit
	if v := strings.TrimSpace(query.Get("limit")); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > tsqLimit {
			d.Problem = "The page size (limit) must be a whole number from 1 to " + strconv.Itoa(tsqLimit) + "."
		}
		pageSize = n
	}
	var after *commandbus.DLQCursor
	if v := strings.TrimSpace(query.Get("before")); v != "" {
		var ok bool
		if after, ok = parseDLQPageMarker(v); !ok {
			d.Problem = "The page marker is not one this page makes."
		}
		d.First = "/dlq"
		if q := f.Query(); len(q) > 0 {
			d.First += "?" + q.Encode()
		}
	}
	var list []*commandbus.DLQEntry
	if d.Problem != "" {
		status, d.First = http.StatusBadRequest, "/dlq"
	} else {
		var err error
		list, err = c.client.DLQ().List(ctx, commandbus.DLQFilter{Domain: f.Domain, Type: f.Type, After: after, Limit: tsqScan})
		if err != nil {
			c.failed(w, r, err)
			return
		}
	}
	// The error filter applies here, so a page scans at most tsqScan records for its rows;
	// the next page resumes after the last record scanned.
	var execIDs []uuid.UUID
	var last *commandbus.DLQEntry
	more := len(list) == tsqScan
	for _, e := range list {
		if len(d.Rows) == pageSize {
			more = true
			break
		}
		last = e
		if f.Error != "" && (e.Command == nil || e.Command.ErrorCode != f.Error) {
			continue
		}
		row := &dlqRow{DLQEntry: e}
		row.ErrorCode, row.ErrorMessage, _ = strings.Cut(e.Error, ": ")
		d.Rows = append(d.Rows, row)
		if e.Command != nil && e.Command.CorrelationID != uuid.Nil {
			execIDs = append(execIDs, e.Command.CorrelationID)
		}
	}
	if more && last != nil {
		q := f.Query()
		if pageSize != tsqLimit {
			q.Set("limit", strconv.Itoa(pageSize))
		}
		q.Set("before", dlqPageMarker(last))
		d.Next = "/dlq?" + q.Encode()
	}
	contexts, err := c.contextsOfExecutions(ctx, execIDs, nil)
	if err != nil {
		c.failed(w, r, err)
		return
	}
	for _, row := range d.Rows {
		if row.Command != nil {
			row.Context = contexts[row.Command.CorrelationID]
		}
	}
	if d.Counts, err = c.tsqCounts(ctx); err != nil {
		c.failed(w, r, err)
		return
	}
	d.Broker = c.brokerDeadLetters(ctx)
	p := c.newPage(w, r, "Dead-letter queue", "tsq")
	p.Data = d
	c.render(w, r, status, "dlq.html", p)
}

// dlqResubmit is the confirmation flow of resubmitting one dead-lettered command.
func (c *Console) dlqResubmit(w http.ResponseWriter, r *http.Request) {
	id, err := uuid.Parse(r.PathValue("id"))
	if err != nil {
		c.errorPage(w, r, http.StatusNotFound, "Not found", "That is not a command id.")
		return
	}
	short := shortID(id)
	spec := &ActionPage{Nav: "tsq", Return: returnTo(r, "/dlq"), Title: "Resubmit command " + short, Submit: "Resubmit command",
		Description: "The command goes back on its queue with a fresh attempt budget and its idempotency key unchanged, so a " +
			"handler that did its work already recognises it. Its dead-letter record is removed.",
		Done: "Command " + short + " was resubmitted and is back on its queue."}
	entry, err := c.client.DLQ().Get(r.Context(), id)
	switch {
	case isNotFound(err):
		spec.Facts = []Fact{{Label: "Command", Value: id.String(), Href: "/commands/" + id.String()}}
		spec.Unavailable = "This command has no dead-letter record any more: it was resubmitted, retried or settled already."
	case err != nil:
		c.failed(w, r, err)
		return
	default:
		spec.Facts = c.dlqFacts(r.Context(), entry)
	}
	spec.Run = func(ctx context.Context, op commandbus.OperatorAction, _ url.Values) error {
		_, err := c.client.DLQ().Resubmit(ctx, id, op)
		return err
	}
	c.act(w, r, spec)
}

// dlqFacts describe a dead-letter record on its confirmation page.
func (c *Console) dlqFacts(ctx context.Context, e *commandbus.DLQEntry) []Fact {
	facts := []Fact{
		{Label: "Command", Value: e.CommandID.String(), Href: "/commands/" + e.CommandID.String()},
		{Label: "Parked at", Value: formatTime(e.ParkedAt)},
		{Label: "Parked by", Value: e.ParkedBy},
		{Label: "Attempts", Value: strconv.Itoa(e.Attempts)},
		{Label: "Error", Value: e.Error},
	}
	if e.Command == nil {
		return facts
	}
	facts = append(facts[:1], append([]Fact{{Label: "Domain and type", Value: e.Command.Domain + " / " + e.Command.Type}}, facts[1:]...)...)
	if f, ok := c.itemFact(ctx, e.Command.CorrelationID); ok {
		facts = append(facts, f)
	}
	return facts
}
