package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/google/uuid"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/examples/payments"
)

// The header's search box takes whatever an operator has at hand: a payment id, an idempotency
// key, an account, an execution id, a command id or a batch id. One exact match goes straight
// to its page; an account lists its payments; several matches are listed; nothing found says so
// and what can be searched.

// searchHit is one thing a search found, with the page that shows it.
type searchHit struct {
	Kind  string
	Label string
	Href  string
}

type searchData struct {
	Query    string
	Hits     []searchHit
	Account  *payments.Account
	Payments []*payments.PaymentView
	Error    string
}

// maxSearchLength bounds a query; ids and keys are far shorter.
const maxSearchLength = 200

// maxAccountPayments bounds the payments listed for an account.
const maxAccountPayments = 100

func (c *console) search(w http.ResponseWriter, r *http.Request) {
	d := &searchData{Query: strings.TrimSpace(r.URL.Query().Get("q"))}
	status := http.StatusOK
	switch {
	case d.Query == "":
	case len(d.Query) > maxSearchLength || strings.ContainsFunc(d.Query, isControl):
		d.Error = fmt.Sprintf("Search for one id, key or account: at most %d characters, without control characters.", maxSearchLength)
		d.Query, status = "", http.StatusUnprocessableEntity
	default:
		if err := c.find(r.Context(), d); err != nil {
			c.failed(w, r, err)
			return
		}
		if len(d.Hits) == 1 && d.Account == nil {
			http.Redirect(w, r, d.Hits[0].Href, http.StatusSeeOther)
			return
		}
		if len(d.Hits) == 0 && d.Account == nil {
			status = http.StatusNotFound
		}
	}
	p := c.newPage(w, r, "Search", "")
	p.Data = d
	c.render(w, r, status, "search.html", p)
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }

// find fills d with everything the query names exactly.
func (c *console) find(ctx context.Context, d *searchData) error {
	seen := map[string]bool{}
	add := func(h searchHit) {
		if !seen[h.Href] {
			seen[h.Href] = true
			d.Hits = append(d.Hits, h)
		}
	}
	q := d.Query
	id, isID := uuid.Parse(q)
	if c.platform != nil {
		terms := []string{q}
		if isID == nil && id.String() != q {
			terms = append(terms, id.String())
		}
		account, err := c.platform.GetAccount(ctx, q)
		if isNotFound(err) && strings.ToUpper(q) != q {
			account, err = c.platform.GetAccount(ctx, strings.ToUpper(q))
		}
		switch {
		case err == nil:
			d.Account = account
			terms = append(terms, account.ID)
		case !isNotFound(err):
			return err
		}
		for i, term := range terms {
			if slices.Contains(terms[:i], term) {
				continue
			}
			found, err := c.platform.SearchPayments(ctx, term, maxAccountPayments)
			if err != nil {
				return err
			}
			for _, v := range found {
				switch {
				case d.Account != nil && (v.DebitAccount == d.Account.ID || v.CreditAccount == d.Account.ID):
					if !slices.ContainsFunc(d.Payments, func(p *payments.PaymentView) bool { return p.ID == v.ID }) {
						d.Payments = append(d.Payments, v)
					}
				case v.IdempotencyKey == q:
					add(searchHit{Kind: "Payment", Label: "Payment " + shortID(v.ID) + " with idempotency key " + q, Href: "/payments/" + v.ID.String()})
				case v.ExecutionID == id:
					add(searchHit{Kind: "Payment", Label: "Payment " + shortID(v.ID) + ", run by execution " + shortID(id), Href: "/payments/" + v.ID.String()})
				default:
					add(searchHit{Kind: "Payment", Label: "Payment " + shortID(v.ID), Href: "/payments/" + v.ID.String()})
				}
			}
		}
	}
	if isID != nil {
		return nil
	}
	exec, err := c.client.Driver().Executor().ExecutionGet(ctx, id)
	switch {
	case err == nil:
		add(searchHit{Kind: "Process", Label: exec.Type + " execution " + shortID(id) + " (" + string(exec.Status) + ")", Href: c.executionHref(exec)})
	case !errors.Is(err, driver.ErrNotFound):
		return err
	}
	cmd, err := c.client.GetCommand(ctx, id)
	switch {
	case err == nil:
		add(searchHit{Kind: "Command", Label: cmd.Domain + " / " + cmd.Type + " command " + shortID(id) + " (" + string(cmd.Status) + ")", Href: "/commands/" + id.String()})
	case !isNotFound(err):
		return err
	}
	if c.platform != nil {
		b, err := c.platform.GetBatch(ctx, id)
		switch {
		case err == nil:
			add(searchHit{Kind: "Batch", Label: "Batch " + shortID(id) + " for " + b.ScheduledFor, Href: "/batches/" + id.String()})
		case !errors.Is(err, commandbus.ErrNotFound):
			return err
		}
	}
	return nil
}
