package tenantweb

import (
	"context"
	"embed"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/server"
	"github.com/commandbus/commandbus/server/console"
	"github.com/commandbus/commandbus/tenant"
)

//go:embed templates/*.html
var templates embed.FS

// mountConsole registers the console's Tenants page, its action and its navigation entry.
func (e *Extension) mountConsole(m *server.Mount) error {
	if err := m.Templates(templates, "templates/*.html"); err != nil {
		return err
	}
	m.HandlePage("GET /tenants", server.RoleViewer, e.tenantsPage)
	m.HandlePage("GET /tenants/{id}/edit", server.RoleOperator, e.editTenant)
	m.HandlePage("POST /tenants/{id}/edit", server.RoleOperator, e.editTenant)
	m.Nav(server.NavEntry{Key: "tenants", Label: "Tenants", Href: "/tenants", AfterQueues: true})
	return nil
}

// tenantRow is one line of the page.
type tenantRow struct {
	*tenant.Tenant
	// Percent is how full the tenant's slots are, 0 to 100, for the bar.
	Percent int
	// OldestAge is the age of the oldest queued execution, "" when none waits.
	OldestAge string
}

type tenantsData struct {
	Items []*tenantRow
	Tiers []*tenant.Tier
	// Next is the link to the following tenants by id (empty on the last page); First, to the
	// first page (empty on it).
	Next, First string
}

// tenantsPageSize is how many tenants the page shows at once.
const tenantsPageSize = server.DefaultListLimit

// age words a duration for the page: seconds, minutes or hours.
func age(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm %ds", int(d.Minutes()), int(d.Seconds())%60)
	default:
		return fmt.Sprintf("%dh %dm", int(d.Hours()), int(d.Minutes())%60)
	}
}

// tenantsPage lists the tenants by id, a page at a time: ?after=ID shows the tenants after ID.
func (e *Extension) tenantsPage(w http.ResponseWriter, r *http.Request) {
	after := strings.TrimSpace(r.URL.Query().Get("after"))
	list, err := e.tenants.List(r.Context(), tenant.ListRequest{AfterID: after, Limit: tenantsPageSize + 1})
	if err != nil {
		e.m.Failed(w, r, err)
		return
	}
	d := tenantsData{Items: make([]*tenantRow, 0, len(list))}
	if len(list) > tenantsPageSize {
		list = list[:tenantsPageSize]
		d.Next = "/tenants?" + url.Values{"after": {list[len(list)-1].ID}}.Encode()
	}
	if after != "" {
		d.First = "/tenants"
	}
	now := time.Now()
	for _, t := range list {
		row := &tenantRow{Tenant: t}
		if t.MaxActive > 0 {
			row.Percent = min(100, t.Active*100/t.MaxActive)
		} else if t.Active > 0 {
			row.Percent = 100
		}
		if t.OldestQueuedAt != nil {
			row.OldestAge = age(now.Sub(*t.OldestQueuedAt))
		}
		d.Items = append(d.Items, row)
	}
	if d.Tiers, err = e.tenants.Tiers(r.Context()); err != nil {
		e.m.Failed(w, r, err)
		return
	}
	p := e.m.NewPage(w, r, "Tenants", "tenants")
	p.Data = d
	e.m.Render(w, r, http.StatusOK, "tenants.html", p)
}

// editTenant changes a tenant's tier, its own limit or its status, through the console's
// confirmation flow: the operator gives a reason, and the change is audited.
func (e *Extension) editTenant(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	t, err := e.tenants.Get(r.Context(), id)
	if err != nil {
		e.m.Failed(w, r, err)
		return
	}
	override := ""
	if t.MaxActiveOverride != nil {
		override = strconv.Itoa(*t.MaxActiveOverride)
	}
	tiers, err := e.tenants.Tiers(r.Context())
	if err != nil {
		e.m.Failed(w, r, err)
		return
	}
	names := make([]string, len(tiers))
	for i, tier := range tiers {
		names[i] = fmt.Sprintf("%s (%d)", tier.Tier, tier.MaxActive)
	}
	spec := &server.ActionPage{Nav: "tenants", Return: e.m.ReturnTo(r, "/tenants"),
		Title: "Change tenant " + t.ID, Submit: "Change",
		Description: "A raised limit or a reactivation admits queued executions at once; a lower limit admits nothing until the tenant is under it (running executions are not stopped). Deleting fails the queued executions.",
		Done:        "Tenant " + t.ID + " changed.",
		Facts: []server.Fact{
			{Label: "Tenant", Value: t.ID},
			{Label: "Tier", Value: t.Tier},
			{Label: "Active", Value: fmt.Sprintf("%d of %d", t.Active, t.MaxActive)},
			{Label: "Queued", Value: strconv.Itoa(t.Queued)},
		},
		Fields: []console.FormField{
			{Name: "tier", Label: "Tier", Kind: "text", Value: t.Tier, Required: true, Hint: "one of " + strings.Join(names, ", ")},
			{Name: "maxActiveOverride", Label: "Own limit", Kind: "text", Value: override, Hint: "executions active at once instead of the tier's; empty: the tier's"},
			{Name: "status", Label: "Status", Kind: "text", Value: string(t.Status), Required: true, Hint: "active, suspended or deleted"},
		},
		Run: func(ctx context.Context, op commandbus.OperatorAction, form url.Values) error {
			req := tenant.UpdateRequest{Actor: op.Actor, Reason: op.Reason}
			tier := strings.TrimSpace(form.Get("tier"))
			req.Tier = &tier
			status := tenant.Status(strings.TrimSpace(form.Get("status")))
			req.Status = &status
			switch limit := strings.TrimSpace(form.Get("maxActiveOverride")); limit {
			case "":
				req.ClearOverride = true
			default:
				n, err := strconv.Atoi(limit)
				if err != nil {
					return &commandbus.ValidationError{Field: "maxActiveOverride", Message: "must be a whole number"}
				}
				req.MaxActiveOverride = &n
			}
			_, _, err := e.tenants.Update(ctx, id, req)
			return err
		},
	}
	e.m.Act(w, r, spec)
}
