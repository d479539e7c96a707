package server

import (
	"net/http"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/examples/payments"
	"github.com/commandbus/commandbus/process"
)

func (s *Server) openAPI(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, openAPIDocument(s.cfg.Platform != nil))
}

type object = map[string]any

// op describes one operation for the OpenAPI document.
type op struct {
	method, path, summary, tag string
	operator                   bool
	params                     []object
	body                       object // request body schema
	responses                  object // status -> description or response object
}

func ref(name string) object { return object{"$ref": "#/components/schemas/" + name} }

// itemsOf is a list response: {"items": [schema...]}.
func itemsOf(schema object) object {
	return object{"type": "object", "properties": object{"items": object{"type": "array", "items": schema}}}
}

func jsonBody(schema object) object {
	return object{"required": true, "content": object{"application/json": object{"schema": schema}}}
}

func jsonResponse(description string, schema object) object {
	return object{"description": description, "content": object{"application/json": object{"schema": schema}}}
}

func problem(description string) object {
	return object{"description": description, "content": object{"application/problem+json": object{"schema": ref("Problem")}}}
}

func pathParam(name, description string) object {
	return object{"name": name, "in": "path", "required": true, "description": description, "schema": object{"type": "string", "format": "uuid"}}
}

func queryParam(name, description, typ string) object {
	return object{"name": name, "in": "query", "required": false, "description": description, "schema": object{"type": typ}}
}

var anyObject = object{"type": "object", "additionalProperties": true}

// openAPIDocument is the OpenAPI 3 description of every route.
func openAPIDocument(withPayments bool) object {
	id := pathParam("id", "resource id")
	ops := []op{
		{method: "get", path: "/healthz", summary: "Liveness", tag: "operations", responses: object{"200": jsonResponse("The process is up.", anyObject)}},
		{method: "get", path: "/readyz", summary: "Readiness: the database answers and the workers run", tag: "operations",
			responses: object{"200": jsonResponse("Ready.", anyObject), "503": problem("Not ready.")}},
		{method: "get", path: "/metrics", summary: "Prometheus metrics", tag: "operations",
			responses: object{"200": object{"description": "Prometheus text exposition.", "content": object{"text/plain": object{"schema": object{"type": "string"}}}}}},
		{method: "get", path: "/api/openapi.json", summary: "This document", tag: "operations", responses: object{"200": jsonResponse("OpenAPI 3 document.", anyObject)}},
		{method: "get", path: "/api/queues", summary: "Queue depths", tag: "commands", responses: object{"200": jsonResponse("Depth per queue.", object{"type": "object", "properties": object{"queues": object{"type": "array", "items": schemaOf[commandbus.QueueDepth]()}}})}},
		{method: "get", path: "/api/commands/{id}", summary: "A command with its audit trail", tag: "commands", params: []object{id},
			responses: object{"200": jsonResponse("The command.", ref("Command")), "404": problem("No such command.")}},
		{method: "get", path: "/api/processes/{id}", summary: "An execution with its state and log", tag: "processes", params: []object{id},
			responses: object{"200": jsonResponse("The execution.", ref("Execution")), "404": problem("No such execution.")}},
		{method: "get", path: "/api/tsq/commands", summary: "Commands in the troubleshooting queue", tag: "tsq",
			params:    []object{queryParam("domain", "only this domain", "string"), queryParam("type", "only this command type", "string"), queryParam("tenant", "only this tenant", "string"), queryParam("batch", "only this batch", "string"), queryParam("limit", "most items", "integer")},
			responses: object{"200": jsonResponse("Commands waiting for an operator.", itemsOf(ref("Command")))}},
	}
	for _, action := range []string{"retry", "cancel", "complete"} {
		ops = append(ops, op{method: "post", path: "/api/tsq/commands/{id}/" + action, summary: action + " a command in the troubleshooting queue (audited)", tag: "tsq", operator: true,
			params: []object{id}, body: ref("CommandAction"),
			responses: object{"200": jsonResponse("The command after the action.", ref("Command")), "400": problem("Invalid input (a reason is required)."), "404": problem("No such command."), "409": problem("Not in the troubleshooting queue.")}})
	}
	ops = append(ops, op{method: "get", path: "/api/tsq/processes", summary: "Executions in the troubleshooting queue", tag: "tsq",
		params:    []object{queryParam("domain", "only this domain", "string"), queryParam("type", "only this process type", "string"), queryParam("limit", "most items", "integer")},
		responses: object{"200": jsonResponse("Executions waiting for an operator.", itemsOf(ref("Execution")))}})
	for _, action := range []string{"retry", "cancel", "complete", "skip"} {
		ops = append(ops, op{method: "post", path: "/api/tsq/processes/{id}/" + action, summary: action + " an execution (audited)", tag: "tsq", operator: true,
			params: []object{id}, body: ref("ProcessAction"),
			responses: object{"200": jsonResponse("The execution after the action.", ref("Execution")), "400": problem("Invalid input."), "404": problem("No such execution."), "409": problem("Not in a state the action applies to, or running right now.")}})
	}
	if withPayments {
		ops = append(ops, paymentOperations()...)
	}

	paths := object{}
	for _, o := range ops {
		item, _ := paths[o.path].(object)
		if item == nil {
			item = object{}
			paths[o.path] = item
		}
		operation := object{"summary": o.summary, "tags": []string{o.tag}, "responses": o.responses}
		if o.params != nil {
			operation["parameters"] = o.params
		}
		if o.body != nil {
			operation["requestBody"] = jsonBody(o.body)
		}
		if o.path != "/healthz" && o.path != "/readyz" && o.path != "/api/openapi.json" {
			role := "viewer"
			if o.operator {
				role = "operator"
			}
			operation["security"] = []object{{"bearer": []string{}}}
			operation["x-required-role"] = role
			responses := o.responses
			responses["401"] = problem("No valid bearer token.")
			if o.operator {
				responses["403"] = problem("The token's role is viewer; operator is required.")
			}
		}
		item[o.method] = operation
	}
	return object{
		"openapi": "3.0.3",
		"info": object{"title": "commandbus API", "version": "1.0.0",
			"description": "Reliable multi-step business processes on PostgreSQL: the reference payments platform, both troubleshooting queues, and operations. Errors are application/problem+json with a stable code. Mutating calls need an operator token and are audited with its subject."},
		"paths": paths,
		"components": object{
			"securitySchemes": object{"bearer": object{"type": "http", "scheme": "bearer", "description": "Tokens are configured in server.tokens with the role viewer or operator."}},
			"schemas":         schemas(),
		},
	}
}

func schemas() object {
	str := object{"type": "string"}
	return object{
		"Problem": object{"type": "object", "required": []string{"type", "title", "status", "code"}, "properties": object{
			"type": str, "title": str, "status": object{"type": "integer"}, "code": str, "detail": str, "existingId": str,
			"errors": object{"type": "array", "items": object{"type": "object", "properties": object{"field": str, "message": str}}},
		}},
		"Command":       schemaOf[commandbus.CommandRow](),
		"Execution":     schemaOf[process.InstanceJSON](),
		"CommandAction": object{"type": "object", "required": []string{"reason"}, "properties": object{"reason": str, "result": anyObject}},
		"ProcessAction": object{"type": "object", "required": []string{"reason"}, "properties": object{
			"reason": str, "runCompensations": object{"type": "boolean"}, "stateOverrides": anyObject, "step": str, "result": anyObject,
		}},
		"PaymentRequest": object{"type": "object", "required": []string{"debitAccount", "creditAccount", "amount", "currency"}, "properties": object{
			"debitAccount": str, "creditAccount": str, "amount": object{"type": "string", "description": "decimal, e.g. 100.00"},
			"currency": object{"type": "string", "description": "ISO 4217 code of the amount"}, "creditCurrency": object{"type": "string", "description": "ISO 4217; differs from currency for a cross-currency payment"},
			"valueDate": object{"type": "string", "format": "date"}, "idempotencyKey": str, "processType": object{"type": "string", "enum": []string{"step", "manager"}},
		}},
		"Payment":        schemaOf[payments.PaymentView](),
		"PaymentResult":  schemaOf[payments.PaymentResult](),
		"BatchRequest":   object{"type": "object", "required": []string{"count"}, "properties": object{"count": object{"type": "integer"}, "day": object{"type": "string", "format": "date"}, "processType": object{"type": "string", "enum": []string{"step", "manager"}}, "behavior": anyObject}},
		"Batch":          schemaOf[payments.BatchView](),
		"Approval":       schemaOf[payments.Approval](),
		"NetworkPending": schemaOf[payments.PendingNetworkResponse](),
		"NetworkAnswer":  object{"type": "object", "properties": object{"success": object{"type": "boolean"}, "errorCode": str, "errorMessage": str, "reason": str}},
		"DecisionBody":   object{"type": "object", "properties": object{"reason": str}},
	}
}

func paymentOperations() []op {
	id := pathParam("id", "resource id")
	return []op{
		{method: "post", path: "/api/payments", summary: "Submit a payment", tag: "payments", operator: true, body: ref("PaymentRequest"),
			responses: object{"200": jsonResponse("Completed at once.", ref("PaymentResult")), "202": jsonResponse("Accepted; the process runs on.", ref("PaymentResult")),
				"400": problem("A bad amount, currency, account or value date; nothing was created."), "409": problem("Duplicate idempotency key; existingId names the original.")}},
		{method: "get", path: "/api/payments", summary: "List payments", tag: "payments",
			params:    []object{queryParam("status", "only this status", "string"), queryParam("batch", "only this batch", "string"), queryParam("limit", "most items", "integer")},
			responses: object{"200": jsonResponse("Payments.", itemsOf(ref("Payment")))}},
		{method: "get", path: "/api/payments/{id}", summary: "A payment: status, risk, FX, L1–L4, error", tag: "payments", params: []object{id},
			responses: object{"200": jsonResponse("The payment.", ref("Payment")), "404": problem("No such payment.")}},
		{method: "post", path: "/api/batches", summary: "Create and run a batch of payments", tag: "batches", operator: true, body: ref("BatchRequest"),
			responses: object{"201": jsonResponse("The batch.", ref("Batch")), "400": problem("Invalid input.")}},
		{method: "get", path: "/api/batches", summary: "List batches", tag: "batches", responses: object{"200": jsonResponse("Batches.", itemsOf(ref("Batch")))}},
		{method: "get", path: "/api/batches/{id}", summary: "A batch with its counts", tag: "batches", params: []object{id},
			responses: object{"200": jsonResponse("The batch.", ref("Batch")), "404": problem("No such batch.")}},
		{method: "get", path: "/api/approvals", summary: "Pending risk approvals", tag: "approvals", responses: object{"200": jsonResponse("Approvals.", itemsOf(ref("Approval")))}},
		{method: "post", path: "/api/approvals/{id}/approve", summary: "Approve (audited)", tag: "approvals", operator: true, params: []object{id}, body: ref("DecisionBody"),
			responses: object{"200": jsonResponse("Approved.", ref("Approval")), "404": problem("No such approval."), "409": problem("Already decided.")}},
		{method: "post", path: "/api/approvals/{id}/reject", summary: "Reject (audited)", tag: "approvals", operator: true, params: []object{id}, body: ref("DecisionBody"),
			responses: object{"200": jsonResponse("Rejected.", ref("Approval")), "404": problem("No such approval."), "409": problem("Already decided.")}},
		{method: "get", path: "/api/network/pending", summary: "Network responses waiting for an operator", tag: "network", responses: object{"200": jsonResponse("Pending responses.", itemsOf(ref("NetworkPending")))}},
		{method: "post", path: "/api/network/pending/{id}/respond", summary: "Answer a pending network response (audited)", tag: "network", operator: true, params: []object{id}, body: ref("NetworkAnswer"),
			responses: object{"200": jsonResponse("Answered.", ref("NetworkPending")), "404": problem("No such pending response."), "409": problem("Already answered.")}},
	}
}
