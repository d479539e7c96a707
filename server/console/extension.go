package console

import (
	"bytes"
	"context"
	"fmt"
	"html/template"
	"io/fs"

	"github.com/google/uuid"

	"github.com/commandbus/commandbus/driver"
)

// Hooks are what an application tells the console of its domain: the page where an execution
// reads best, the business item an execution runs, what its search finds, what it adds to the
// overview, and the rule for completing its executions by hand. The console knows nothing of the
// application's domain; hooks are how it learns. server.ExtensionBase implements every hook as
// doing nothing.
type Hooks interface {
	// ExecutionPage is the console page where an execution reads best (its business item's
	// page), or "" for the generic process page.
	ExecutionPage(row *driver.ExecutionRow) string
	// ExecutionContexts describes the business items the given executions run, by execution id;
	// executions the hooks do not know are left out.
	ExecutionContexts(ctx context.Context, rows []*driver.ExecutionRow) (map[uuid.UUID]*ItemContext, error)
	// Search finds what an operator's search names exactly; nil finds nothing.
	Search(ctx context.Context, query string) (*SearchResult, error)
	// Overview is what the hooks add to the console's overview; nil adds nothing.
	Overview(ctx context.Context) (*Overview, error)
	// CompletionRule guards completing executions of processType by hand (the REST API and the
	// console both apply it); nil lets any state overrides through.
	CompletionRule(processType string) *CompletionRule
}

// ItemContext is the business item an execution runs, as the console shows it in queue rows,
// confirmation pages and bulk results.
type ItemContext struct {
	// Noun names the item in a sentence ("payment").
	Noun string
	// Href is the item's console page.
	Href string
	// Summary is the item in a queue row (render it with Fragment).
	Summary template.HTML
	// Brief is the item in a few words, for a bulk action's results ("payment 1a2b3c4d, 250.50 GBP").
	Brief string
	// Fact is the item as one line of a confirmation page.
	Fact Fact
}

// CompletionRule is what completing an execution by hand requires.
type CompletionRule struct {
	// Required marks the console's state overrides field required (Check enforces what it needs).
	Required bool
	// Hint tells the operator what to give; it replaces the console's generic hint.
	Hint string
	// Check validates the overrides; nil accepts any.
	Check func(overrides map[string]any) error
}

// SearchResult is what an extension's search found.
type SearchResult struct {
	// Hits are the things found, each with its page. One hit alone (and no section) sends the
	// operator straight to its page.
	Hits []SearchHit
	// Sections are larger findings shown on the result page (render them with Fragment).
	Sections []template.HTML
}

// SearchHit is one thing a search found, with the page that shows it.
type SearchHit struct {
	Kind  string
	Label string
	Href  string
}

// SearchHint words the console's search box for what the extensions find.
type SearchHint struct {
	// Label describes what can be searched ("Payment id, idempotency key, account, …").
	Label string
	// Placeholder is the header search box's placeholder.
	Placeholder string
	// Help explains, when nothing was found, what the search matches.
	Help string
	// Prompt invites a search on the empty search page.
	Prompt string
}

// Overview is what an extension adds to the console's overview.
type Overview struct {
	// Cards are counts shown beside the built-in ones; a card with a non-zero value is marked.
	Cards []Card
	// Panels are sections below the charts, refreshed live.
	Panels []Panel
}

// Card is one count on the overview.
type Card struct {
	// ID is the value's element id ("count-approvals").
	ID    string
	Label string
	Value int64
	// Unit words the value and links to Href.
	Unit, Href string
}

// Panel is one section of the overview. Its body is the extension's template Template rendered
// with the overview page whose Data is Data (so .CanAct tells an operator), refreshed live as
// the region "ov-"+ID.
type Panel struct {
	ID, Title string
	Template  string
	Data      any
	// LinkHref and LinkText end the section with a link, when set.
	LinkHref, LinkText string
}

// NavEntry is one entry of the console's main navigation.
type NavEntry struct {
	// Key is the Nav a page gives to mark the entry current.
	Key, Label, Href string
	// AfterQueues places the entry after the troubleshooting queue; else before it.
	AfterQueues bool
}

// extensionTemplates are one extension's console templates.
type extensionTemplates struct {
	fsys     fs.FS
	partials []string
	pages    []string
}

// fragment renders an extension's shared block name.
func (c *Console) fragment(name string, data any) (template.HTML, error) {
	if c.fragments == nil || c.fragments.Lookup(name) == nil {
		return "", fmt.Errorf("console: no template block %q", name)
	}
	var buf bytes.Buffer
	if err := c.fragments.ExecuteTemplate(&buf, name, data); err != nil {
		return "", err
	}
	return template.HTML(buf.String()), nil //nolint:gosec // html/template escaped it
}
