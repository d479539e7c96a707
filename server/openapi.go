package server

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/process"
	"github.com/commandbus/commandbus/server/internal/httpx"
)

func (s *Server) openAPI(w http.ResponseWriter, r *http.Request) {
	if err := parseQuery(r).err(); err != nil {
		s.writeError(w, r, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, s.document())
}

type object = map[string]any

// Operation describes one route for the OpenAPI document. The document adds the responses
// every route shares: 400 for invalid input, 401/403 for a missing token or role, 413/415 for a
// body, 500.
type Operation struct {
	// ID is the operationId, unique in the document; Method is lowercase ("get", "post").
	ID, Method, Path, Summary, Tag string
	// Description says more than the summary, when there is more to say.
	Description string
	// Operator marks a route that needs an operator token; others need a viewer token.
	Operator bool
	// Public marks a route that needs no token.
	Public bool
	// Params are OpenAPI parameter objects (see PathParam, EnumParam, UUIDParam, LimitParam).
	Params []map[string]any
	// Body names the request body's schema in the document's components, if the route takes one.
	Body string
	// BodyTypes are media types the body may come in besides application/json (the same schema),
	// such as application/cloudevents+json. Default: none.
	BodyTypes []string
	// Example is the request body example; the document test sends it.
	Example any
	// Responses maps a status ("200") to an OpenAPI response object (see JSONResponse, ProblemResponse).
	Responses map[string]any
}

func ref(name string) object { return object{"$ref": "#/components/schemas/" + name} }

// itemsOf is a list response: {"items": [schema...]}, the list always present, [] when empty.
func itemsOf(schema object) object {
	return object{"type": "object", "required": []string{"items"}, "properties": object{"items": object{"type": "array", "items": schema}}}
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

func queryParam(name, description string, schema object, example any) object {
	p := object{"name": name, "in": "query", "required": false, "description": description, "schema": schema}
	if example != nil {
		p["example"] = example
	}
	return p
}

func limitParam(def, most int) object {
	return queryParam("limit", fmt.Sprintf("most items to return; default %d", def),
		object{"type": "integer", "minimum": 1, "maximum": most, "default": def}, 20)
}

// textParam is a filter on a name: printable, at most 200 characters.
func textParam(name, description string) object {
	return queryParam(name, description, object{"type": "string", "maxLength": 200}, nil)
}

func enumParam(name, description string, values []string, example string) object {
	var ex any
	if example != "" {
		ex = example
	}
	return queryParam(name, description, object{"type": "string", "enum": values}, ex)
}

func uuidParam(name, description string) object {
	return queryParam(name, description, object{"type": "string", "format": "uuid"}, nil)
}

var (
	statusObject = object{"type": "object", "required": []string{"status"}, "properties": object{"status": object{"type": "string"}}}
	anyObject    = object{"type": "object", "additionalProperties": true}
)

// exampleReason is the reason every documented operator action gives.
const exampleReason = "Downstream fixed after incident INC-4711."

// openAPIDocument is the OpenAPI 3 description of every route. Request schemas are derived from
// the handlers' request types, response schemas from the types they encode.
// The extensions' operations and schemas are added to the server's own.
func openAPIDocument(extra []Operation, extraSchemas map[string]any) object {
	ops := append(builtinOperations(), extra...)

	paths := object{}
	for _, o := range ops {
		item, _ := paths[o.Path].(object)
		if item == nil {
			item = object{}
			paths[o.Path] = item
		}
		responses := object{}
		for status, response := range o.Responses {
			responses[status] = response
		}
		operation := object{"operationId": o.ID, "summary": o.Summary, "tags": []string{o.Tag}, "responses": responses}
		if o.Description != "" {
			operation["description"] = o.Description
		}
		if o.Params != nil {
			operation["parameters"] = o.Params
		}
		if o.Params != nil || o.Body != "" {
			responses["400"] = problem("Invalid input: each problem names its field; nothing was changed.")
		} else if o.ID != "getHealth" && o.ID != "getReadiness" {
			responses["400"] = problem("The route takes no query parameters.")
		}
		if o.Body != "" {
			media := object{"schema": ref(o.Body)}
			if o.Example != nil {
				media["example"] = o.Example
			}
			content := object{"application/json": media}
			for _, typ := range o.BodyTypes {
				content[typ] = object{"schema": ref(o.Body)}
			}
			operation["requestBody"] = object{"required": false, "content": content}
			responses["413"] = problem("The body is larger than 64 KiB.")
			responses["415"] = problem("The body is not JSON.")
		}
		if !o.Public {
			role := "viewer"
			if o.Operator {
				role = "operator"
			}
			operation["security"] = []object{{"bearer": []string{}}}
			operation["x-required-role"] = role
			responses["401"] = problem("No valid bearer token in the Authorization header (the console's session cookie is not accepted).")
			if o.Operator {
				responses["403"] = problem("The token's role is viewer; operator is required.")
			}
		}
		responses["500"] = problem("The server failed; the cause is not in the answer but in the server's log, under the requestId the answer gives (code INTERNAL).")
		item[o.Method] = operation
	}
	return object{
		"openapi": "3.0.3",
		"info": object{"title": "commandbus API", "version": "1.0.0",
			"description": strings.Join([]string{
				"Reliable multi-step business processes on PostgreSQL: commands and executions, both troubleshooting queues, operations, and the routes of the server's extensions.",
				"Every error is application/problem+json with a stable code, an unknown route included (404), and a method a route does not take (405, with an Allow header).",
				"Every answer carries X-Request-Id (the client's own when it sends a usable one); a 500 gives only the code INTERNAL and that requestId, under which the server logged the cause.",
				"Versioning: these routes are version 1 of the contract (info.version is its semantic version); within it changes are additive only, and a breaking change is served under a new /api/v2 prefix beside the old routes.",
				"Request bodies are one JSON object of at most 64 KiB with no unknown field and nothing after it; query parameters a route does not take are refused.",
				"Mutating calls need an operator token and are audited with its subject; the bearer scheme is case-insensitive.",
			}, " ")},
		"paths": paths,
		"components": object{
			"securitySchemes": object{"bearer": object{"type": "http", "scheme": "bearer", "description": "Tokens are configured in server.tokens with the role viewer or operator."}},
			"schemas":         withSchemas(withSchemas(withSchemas(withSchemas(withSchemas(schemas(), executionSchemas()), eventSchemas()), outboxSchemas()), dlqSchemas()), extraSchemas),
		},
	}
}

// reasonAnnotation documents the reason every operator action carries.
var reasonAnnotation = object{"description": "why the action is taken; recorded in the audit log",
	"minLength": 1, "maxLength": commandbus.MaxReasonLength}

func schemas() object {
	return object{
		"Problem": annotate(schemaOf[Problem](), map[string]object{"code": {"description": "stable machine-readable code, such as VALIDATION_FAILED"}, "errors": {"description": "the invalid fields"},
			"requestId": {"description": "the id the server logged the request under; also in the X-Request-Id header"}}),
		"Command":          schemaOf[commandbus.CommandRow](),
		"Execution":        schemaOf[process.InstanceJSON](),
		"ExecutionSummary": schemaOf[driver.ExecutionRow](),
		"CommandAction":    annotate(requestSchemaOf[commandActionRequest](), map[string]object{"reason": reasonAnnotation}),
		"CommandComplete":  annotate(requestSchemaOf[commandCompleteRequest](), map[string]object{"reason": reasonAnnotation, "result": {"description": "the command's result, as its handler would have replied"}}),
		"ProcessRetry":     annotate(requestSchemaOf[processRetryRequest](), map[string]object{"reason": reasonAnnotation}),
		"ProcessCancel": annotate(requestSchemaOf[processCancelRequest](), map[string]object{"reason": reasonAnnotation,
			"runCompensations": {"description": "run the compensations of the completed steps, in reverse order, before ending CANCELLED", "default": false}}),
		"ProcessComplete": annotate(requestSchemaOf[processCompleteRequest](), map[string]object{"reason": reasonAnnotation,
			"stateOverrides": {"description": "top-level state fields to set first; an extension may require some for its process types", "additionalProperties": true}}),
		"ProcessSkip": annotate(requestSchemaOf[processSkipRequest](), map[string]object{"reason": reasonAnnotation,
			"step": {"description": "the step the execution is at", "minLength": 1, "maxLength": 200}, "result": {"description": "the step's result, shaped as the step returns it"}}),
	}
}

// withSchemas adds the extensions' schemas to the server's (Mount.Document refused names taken).
func withSchemas(schemas, extra map[string]any) object {
	for name, schema := range extra {
		if _, taken := schemas[name]; !taken {
			schemas[name] = schema
		}
	}
	return schemas
}

// builtinOperations are the server's own routes.
func builtinOperations() []Operation {
	id := pathParam("id", "resource id")
	ops := []Operation{
		{ID: "getHealth", Method: "get", Path: "/healthz", Summary: "Liveness", Tag: "operations", Public: true,
			Responses: object{"200": jsonResponse("The process is up.", statusObject)}},
		{ID: "getReadiness", Method: "get", Path: "/readyz", Summary: "Readiness: the database answers and the workers run", Tag: "operations", Public: true,
			Responses: object{"200": jsonResponse("Ready.", statusObject), "503": problem("Not ready.")}},
		{ID: "getMetrics", Method: "get", Path: "/metrics", Summary: "Prometheus metrics", Tag: "operations",
			Responses: object{"200": object{"description": "Prometheus text exposition.", "content": object{"text/plain": object{"schema": object{"type": "string"}}}}}},
		{ID: "getOpenAPI", Method: "get", Path: "/api/openapi.json", Summary: "This document", Tag: "operations", Public: true,
			Responses: object{"200": jsonResponse("OpenAPI 3 document.", anyObject)}},
		{ID: "listQueueDepths", Method: "get", Path: "/api/queues", Summary: "Queue depths", Tag: "commands",
			Description: "Not paged: one entry per configured queue with unfinished commands, bounded by the configuration.",
			Responses: object{"200": jsonResponse("Depth per queue with unfinished commands.", object{"type": "object", "required": []string{"queues"},
				"properties": object{"queues": object{"type": "array", "items": schemaOf[commandbus.QueueDepth]()}}})}},
		{ID: "getCommand", Method: "get", Path: "/api/commands/{id}", Summary: "A command with its audit trail", Tag: "commands", Params: []object{id},
			Responses: object{"200": jsonResponse("The command.", ref("Command")), "404": problem("No such command.")}},
		{ID: "getProcess", Method: "get", Path: "/api/processes/{id}", Summary: "An execution with its state and log", Tag: "processes", Params: []object{id},
			Responses: object{"200": jsonResponse("The execution.", ref("Execution")), "404": problem("No such execution.")}},
		{ID: "listCommandTSQ", Method: "get", Path: "/api/tsq/commands", Summary: "Commands in the troubleshooting queue, newest first", Tag: "tsq",
			Params: []object{textParam("domain", "only this domain"), textParam("type", "only this command type"), textParam("tenant", "only this tenant"),
				uuidParam("batch", "only this batch"), cursorParam(), limitParam(defaultListLimit, maxListLimit)},
			Responses: object{"200": jsonResponse("A page of commands waiting for an operator.", pageSchema(ref("Command")))}},
	}
	commandBodies := map[string]struct {
		schema  string
		example object
		summary string
	}{
		"retry":    {"CommandAction", object{"reason": exampleReason}, "Retry a command with a fresh attempt budget (audited)"},
		"cancel":   {"CommandAction", object{"reason": "The customer withdrew the order."}, "Cancel a command (audited)"},
		"complete": {"CommandComplete", object{"reason": "Booked by phone with the provider.", "result": object{"reference": "RISK-MANUAL-1"}}, "Complete a command with the result its handler would have given (audited)"},
	}
	for _, action := range commandTSQActions {
		b := commandBodies[action]
		ops = append(ops, Operation{ID: action + "Command", Method: "post", Path: "/api/tsq/commands/{id}/" + action, Summary: b.summary, Tag: "tsq", Operator: true,
			Params: []object{id}, Body: b.schema, Example: b.example,
			Responses: object{"200": jsonResponse("The command after the action.", ref("Command")), "404": problem("No such command."),
				"409": problem("The command is not in the troubleshooting queue.")}})
	}
	ops = append(ops, Operation{ID: "listProcessTSQ", Method: "get", Path: "/api/tsq/processes", Summary: "Executions in the troubleshooting queue, newest first", Tag: "tsq",
		Params:    []object{textParam("domain", "only this domain"), textParam("type", "only this process type"), cursorParam(), limitParam(defaultListLimit, maxListLimit)},
		Responses: object{"200": jsonResponse("A page of executions waiting for an operator, without their logs.", pageSchema(ref("ExecutionSummary")))}})
	processBodies := map[string]struct {
		schema, summary, description string
		example                      object
	}{
		"retry": {"ProcessRetry", "Retry an execution (audited)", "The execution runs again from the top with a fresh attempt budget for the step it stopped at.",
			object{"reason": exampleReason}},
		"cancel": {"ProcessCancel", "Cancel an execution, optionally running its compensations first (audited)", "",
			object{"reason": "The customer withdrew the payment.", "runCompensations": true}},
		"complete": {"ProcessComplete", "Force-complete an execution (audited)",
			"The execution ends COMPLETED with the given state fields set first. The server's extensions may require fields for their process types (the payments example requires stateOverrides.evidence for its payments), as in the console.",
			object{"reason": "Confirmed by the beneficiary bank.", "stateOverrides": object{"evidence": "SWIFT gpi tracker shows ACSC"}}},
		"skip": {"ProcessSkip", "Complete the step an execution is at with a given result (audited)", "step must be the step the execution is at.",
			object{"reason": "Hold placed by hand in the core banking system.", "step": "STEP_CHECK_BALANCE", "result": object{"holdId": "HOLD-MANUAL-1"}}},
	}
	for _, action := range processTSQActions {
		b := processBodies[action]
		ops = append(ops, Operation{ID: action + "Process", Method: "post", Path: "/api/tsq/processes/{id}/" + action, Summary: b.summary, Description: b.description,
			Tag: "tsq", Operator: true, Params: []object{id}, Body: b.schema, Example: b.example,
			Responses: object{"200": jsonResponse("The execution after the action.", ref("Execution")), "404": problem("No such execution."),
				"409": problem("Not in a state the action applies to, or a runner holds it right now.")}})
	}
	return append(append(append(append(ops, executionOperations()...), eventOperations()...), outboxOperations()...), dlqOperations()...)
}
