package tenantweb

import (
	"github.com/commandbus/commandbus/server"
	"github.com/commandbus/commandbus/tenant"
)

type object = map[string]any

// schemas are the tenant schemas of the OpenAPI document.
func schemas() map[string]any {
	fields := map[string]map[string]any{
		"id":                {"description": "unique; letters, digits, '.', '_', ':', '@' and '-'", "pattern": `^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$`},
		"name":              {"description": "a display name"},
		"tier":              {"description": "a tier with a row in the tier table: FREE (1 at once), PRO (5), ENTERPRISE (20) by default"},
		"status":            {"description": "active admits executions; suspended holds queued ones; deleted fails queued ones", "enum": []string{"active", "suspended", "deleted"}},
		"maxActiveOverride": {"description": "the tenant's own limit of executions active at once, instead of its tier's", "minimum": 0},
		"clearOverride":     {"description": "remove the tenant's own limit: its tier's applies again"},
		"reason":            {"description": "why; recorded in the audit log with the token's subject", "maxLength": 2000},
	}
	createFields, patchFields := map[string]map[string]any{}, map[string]map[string]any{}
	for k, v := range fields {
		if k != "id" {
			patchFields[k] = v
		}
		if k != "clearOverride" && k != "reason" {
			createFields[k] = v
		}
	}
	return object{
		"TenantRequest": server.Annotate(server.RequestSchemaOf[tenant.CreateRequest](), createFields),
		"TenantPatch":   server.Annotate(server.RequestSchemaOf[tenant.UpdateRequest](), patchFields),
		"Tenant":        server.SchemaOf[tenant.Tenant](),
		"TenantUpdated": server.SchemaOf[Updated](),
	}
}

// operations are the tenant routes of the OpenAPI document.
func operations() []server.Operation {
	id := object{"name": "id", "in": "path", "required": true, "description": "the tenant's id", "schema": object{"type": "string"}}
	notFound := server.ProblemResponse("No such tenant.")
	one := func(description string) object { return server.JSONResponse(description, server.Ref("Tenant")) }
	return []server.Operation{
		{ID: "listTenants", Method: "get", Path: "/api/tenants", Summary: "List tenants with their limit, active executions and queue", Tag: "tenants",
			Params: []map[string]any{server.LimitParam(server.DefaultListLimit, server.MaxListLimit),
				server.EnumParam("status", "only tenants in this status", []string{"active", "suspended", "deleted"}, ""),
				server.CursorParam(),
				{"name": "after", "in": "query", "required": false, "description": "the last id of the previous page (cursor is preferred; cursor wins when both are given)", "schema": object{"type": "string", "maxLength": 200}}},
			Responses: object{"200": server.JSONResponse("A page of tenants, by id; next is the cursor of the following page.", server.PageSchema(server.Ref("Tenant")))}},
		{ID: "createTenant", Method: "post", Path: "/api/tenants", Summary: "Create a tenant", Tag: "tenants", Operator: true, Body: "TenantRequest",
			Description: "Bad input (an unknown tier, a negative limit, a duplicate id) answers 400 naming the field and stores nothing.",
			Example:     object{"id": "acme", "name": "Acme Ltd", "tier": "PRO"},
			Responses:   object{"201": one("The tenant.")}},
		{ID: "getTenant", Method: "get", Path: "/api/tenants/{id}", Summary: "A tenant", Tag: "tenants", Params: []map[string]any{id},
			Responses: object{"200": one("The tenant."), "404": notFound}},
		{ID: "updateTenant", Method: "patch", Path: "/api/tenants/{id}", Summary: "Change a tenant's tier, limit or status", Tag: "tenants", Operator: true, Body: "TenantPatch",
			Description: "Audited with the token's subject. A raised limit or a reactivation admits queued executions at once; a deletion fails them.",
			Params:      []map[string]any{id}, Example: object{"tier": "ENTERPRISE", "reason": "upgraded plan"},
			Responses: object{"200": server.JSONResponse("The tenant after the change, with what it admitted or failed.", server.Ref("TenantUpdated")), "404": notFound}},
	}
}
