package console

import (
	"context"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"strings"

	"github.com/google/uuid"

	"github.com/commandbus/commandbus/driver"
)

// The header's search box takes whatever an operator has at hand: an execution id, a command id,
// or what the extensions find (a business item's id or key). One exact match goes straight to
// its page; an extension's section (such as an account with its items) is shown; several matches
// are listed; nothing found says so and what can be searched.

// searchHit is one thing a search found, with the page that shows it.
type searchHit = SearchHit

type searchData struct {
	Query    string
	Hits     []searchHit
	Sections []template.HTML
	Error    string
}

// maxSearchLength bounds a query; ids and keys are far shorter.
const maxSearchLength = 200

func (c *Console) search(w http.ResponseWriter, r *http.Request) {
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
		if len(d.Hits) == 1 && len(d.Sections) == 0 {
			http.Redirect(w, r, d.Hits[0].Href, http.StatusSeeOther)
			return
		}
		if len(d.Hits) == 0 && len(d.Sections) == 0 {
			status = http.StatusNotFound
		}
	}
	p := c.newPage(w, r, "Search", "")
	p.Data = d
	c.render(w, r, status, "search.html", p)
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }

// find fills d with everything the query names exactly.
func (c *Console) find(ctx context.Context, d *searchData) error {
	seen := map[string]bool{}
	add := func(h searchHit) {
		if !seen[h.Href] {
			seen[h.Href] = true
			d.Hits = append(d.Hits, h)
		}
	}
	q := d.Query
	id, isID := uuid.Parse(q)
	for _, ext := range c.hooks {
		found, err := ext.Search(ctx, q)
		if err != nil {
			return err
		}
		if found != nil {
			for _, h := range found.Hits {
				add(h)
			}
			d.Sections = append(d.Sections, found.Sections...)
		}
	}
	if isID != nil {
		return nil
	}
	exec, err := c.client.Driver().Executor().ExecutionGet(ctx, id)
	switch {
	case err == nil:
		href := c.executionHref(exec)
		if exec.Model != "process" { // other models have no process page
			href = "/executions/" + id.String()
		}
		add(searchHit{Kind: "Process", Label: exec.Type + " execution " + shortID(id) + " (" + string(exec.Status) + ")", Href: href})
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
	return nil
}
