// Package tenantweb puts tenants (package tenant) on the server: the REST routes /api/tenants
// with their OpenAPI operations, and the console's Tenants page (tier, active executions against
// the limit, queue and its oldest item's age; an operator changes a tier or a limit, audited).
// Add it to server.Config.Extensions:
//
//	srv, _ := server.New(server.Config{Client: client, Runtime: rt, Extensions: []server.Extension{tenantweb.New(tenant.New(client))}})
package tenantweb

import (
	"errors"
	"net/http"

	"github.com/commandbus/commandbus/server"
	"github.com/commandbus/commandbus/tenant"
)

// Extension is the tenants' face on the server.
type Extension struct {
	server.ExtensionBase
	tenants *tenant.Service
	m       *server.Mount
}

// New returns the extension over the tenant service.
func New(tenants *tenant.Service) *Extension { return &Extension{tenants: tenants} }

// Mount registers the REST routes, their OpenAPI operations and the console page.
func (e *Extension) Mount(m *server.Mount) error {
	if e.tenants == nil {
		return errors.New("tenantweb: New needs a tenant service")
	}
	e.m = m
	m.HandleAPI("GET /api/tenants", server.RoleViewer, e.list)
	m.HandleAPI("POST /api/tenants", server.RoleOperator, e.create)
	m.HandleAPI("GET /api/tenants/{id}", server.RoleViewer, e.get)
	m.HandleAPI("PATCH /api/tenants/{id}", server.RoleOperator, e.patch)
	m.Document(operations(), schemas())
	return e.mountConsole(m)
}

func (e *Extension) list(w http.ResponseWriter, r *http.Request) {
	q := server.ParseQuery(r, "limit", "status", "cursor", "after")
	limit := q.Limit(server.DefaultListLimit, server.MaxListLimit)
	status := q.OneOf("status", []string{"active", "suspended", "deleted"})
	after := q.Cursor()
	if after == "" {
		after = q.Text("after") // the plain id of the last tenant seen, as before cursors
	}
	if err := q.Err(); err != nil {
		e.m.WriteError(w, r, err)
		return
	}
	// One more than the limit tells whether there is a next page.
	list, err := e.tenants.List(r.Context(), tenant.ListRequest{Status: tenant.Status(status), AfterID: after, Limit: limit + 1})
	if err != nil {
		e.m.WriteError(w, r, err)
		return
	}
	server.WriteJSON(w, http.StatusOK, server.PageOf(list, limit, func(t *tenant.Tenant) string { return t.ID }))
}

func (e *Extension) create(w http.ResponseWriter, r *http.Request) {
	var req tenant.CreateRequest
	if err := server.DecodeBody(w, r, &req); err != nil {
		e.m.WriteError(w, r, err)
		return
	}
	req.Actor = server.Subject(r)
	created, err := e.tenants.Create(r.Context(), req)
	if err != nil {
		e.m.WriteError(w, r, err)
		return
	}
	server.WriteJSON(w, http.StatusCreated, created)
}

func (e *Extension) get(w http.ResponseWriter, r *http.Request) {
	t, err := e.tenants.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		e.m.WriteError(w, r, err)
		return
	}
	server.WriteJSON(w, http.StatusOK, t)
}

// Updated is a PATCH answer: the tenant after the change, and what the change admitted into
// newly free slots or failed (a deletion fails the queued executions).
type Updated struct {
	*tenant.Tenant
	Admitted int `json:"admitted"`
	Failed   int `json:"failed"`
}

func (e *Extension) patch(w http.ResponseWriter, r *http.Request) {
	var req tenant.UpdateRequest
	if err := server.DecodeBody(w, r, &req); err != nil {
		e.m.WriteError(w, r, err)
		return
	}
	req.Actor = server.Subject(r)
	updated, admission, err := e.tenants.Update(r.Context(), r.PathValue("id"), req)
	if err != nil {
		e.m.WriteError(w, r, err)
		return
	}
	server.WriteJSON(w, http.StatusOK, Updated{Tenant: updated, Admitted: admission.Admitted, Failed: admission.Failed})
}
