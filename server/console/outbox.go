package console

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
)

// The undelivered-messages page lists the outbox messages the relays gave up on: a webhook or
// callback whose endpoint kept failing until its last attempt, a message a broker refused.
// Resending puts one back in line, due at once with a fresh attempt budget; the relay publishes
// it again, in order with the other messages of its key.

type outboxData struct {
	Transport string
	Rows      []*driver.OutboxRow
	Counts    tsqCounts
	Truncated bool
}

func (c *Console) outbox(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	d := outboxData{Transport: r.URL.Query().Get("transport")}
	rows, err := c.client.OutboxMessages(ctx, &driver.OutboxListParams{Statuses: []driver.OutboxStatus{driver.OutboxStatusFailed},
		Transport: d.Transport, Limit: tsqLimit + 1})
	if err != nil {
		c.failed(w, r, err)
		return
	}
	if len(rows) > tsqLimit {
		rows, d.Truncated = rows[:tsqLimit], true
	}
	d.Rows = rows
	if d.Counts, err = c.tsqCounts(ctx); err != nil {
		c.failed(w, r, err)
		return
	}
	p := c.newPage(w, r, "Undelivered messages", "tsq")
	p.Data = d
	c.render(w, r, http.StatusOK, "outbox.html", p)
}

// outboxResend is the confirmation flow of resending one undelivered message.
func (c *Console) outboxResend(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		c.errorPage(w, r, http.StatusNotFound, "Not found", "That is not an outbox message id.")
		return
	}
	name := "message " + strconv.FormatInt(id, 10)
	spec := &ActionPage{Nav: "tsq", Return: returnTo(r, "/outbox"), Title: "Resend " + name, Submit: "Resend message",
		Description: "The message goes back in line, due at once with a fresh attempt budget; the relay publishes it again, " +
			"after the earlier messages of its key. Receivers dedupe by its message id, so one that got it already ignores it.",
		Done: "The " + name + " was resent."}
	row, err := c.client.OutboxMessage(r.Context(), id)
	switch {
	case isNotFound(err):
		c.errorPage(w, r, http.StatusNotFound, "Not found", "There is no outbox message "+strconv.FormatInt(id, 10)+".")
		return
	case err != nil:
		c.failed(w, r, err)
		return
	}
	spec.Facts = []Fact{
		{Label: "Destination", Value: row.Transport + " / " + row.Topic},
		{Label: "Type", Value: row.Type},
		{Label: "Message id", Value: row.MessageID},
		{Label: "Key", Value: row.Key},
		{Label: "Attempts", Value: strconv.Itoa(row.Attempts)},
		{Label: "Last error", Value: row.LastError},
		{Label: "Written", Value: formatTime(row.CreatedAt)},
	}
	if row.Status != driver.OutboxStatusFailed {
		spec.Unavailable = "This message is " + string(row.Status) + ", not undelivered: it was resent or published already."
	}
	spec.Run = func(ctx context.Context, op commandbus.OperatorAction, _ url.Values) error {
		_, err := c.client.ResendOutboxMessage(ctx, id, op)
		if errors.Is(err, commandbus.ErrInvalidState) {
			return &commandbus.ValidationError{Field: "reason", Message: "the message is no longer undelivered: it was resent already"}
		}
		return err
	}
	c.act(w, r, spec)
}
