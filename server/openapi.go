package server

import (
	"fmt"
	"net/http"
	"strings"
	"sync"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/examples/payments"
	"github.com/commandbus/commandbus/process"
)

func (s *Server) openAPI(w http.ResponseWriter, r *http.Request) {
	if err := parseQuery(r).err(); err != nil {
		s.writeError(w, r, err)
		return
	}
	if s.cfg.Platform != nil {
		writeJSON(w, http.StatusOK, documentWithPayments())
		return
	}
	writeJSON(w, http.StatusOK, documentWithoutPayments())
}

// The document is built once: it depends only on the Go types and the routes.
var (
	documentWithPayments    = sync.OnceValue(func() object { return openAPIDocument(true) })
	documentWithoutPayments = sync.OnceValue(func() object { return openAPIDocument(false) })
)

type object = map[string]any

// op describes one operation for the OpenAPI document.
type op struct {
	id, method, path, summary, tag string
	// description says more than the summary, when there is more to say.
	description string
	operator    bool
	public      bool // no token needed
	params      []object
	body        string // request body schema name
	example     any    // request body example, sent by the document test
	responses   object // status -> response object
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
func openAPIDocument(withPayments bool) object {
	id := pathParam("id", "resource id")
	ops := []op{
		{id: "getHealth", method: "get", path: "/healthz", summary: "Liveness", tag: "operations", public: true,
			responses: object{"200": jsonResponse("The process is up.", statusObject)}},
		{id: "getReadiness", method: "get", path: "/readyz", summary: "Readiness: the database answers and the workers run", tag: "operations", public: true,
			responses: object{"200": jsonResponse("Ready.", statusObject), "503": problem("Not ready.")}},
		{id: "getMetrics", method: "get", path: "/metrics", summary: "Prometheus metrics", tag: "operations",
			responses: object{"200": object{"description": "Prometheus text exposition.", "content": object{"text/plain": object{"schema": object{"type": "string"}}}}}},
		{id: "getOpenAPI", method: "get", path: "/api/openapi.json", summary: "This document", tag: "operations", public: true,
			responses: object{"200": jsonResponse("OpenAPI 3 document.", anyObject)}},
		{id: "listQueueDepths", method: "get", path: "/api/queues", summary: "Queue depths", tag: "commands",
			responses: object{"200": jsonResponse("Depth per queue with unfinished commands.", object{"type": "object", "required": []string{"queues"},
				"properties": object{"queues": object{"type": "array", "items": schemaOf[commandbus.QueueDepth]()}}})}},
		{id: "getCommand", method: "get", path: "/api/commands/{id}", summary: "A command with its audit trail", tag: "commands", params: []object{id},
			responses: object{"200": jsonResponse("The command.", ref("Command")), "404": problem("No such command.")}},
		{id: "getProcess", method: "get", path: "/api/processes/{id}", summary: "An execution with its state and log", tag: "processes", params: []object{id},
			responses: object{"200": jsonResponse("The execution.", ref("Execution")), "404": problem("No such execution.")}},
		{id: "listCommandTSQ", method: "get", path: "/api/tsq/commands", summary: "Commands in the troubleshooting queue, newest first", tag: "tsq",
			params: []object{textParam("domain", "only this domain"), textParam("type", "only this command type"), textParam("tenant", "only this tenant"),
				uuidParam("batch", "only this batch"), limitParam(defaultListLimit, maxListLimit)},
			responses: object{"200": jsonResponse("Commands waiting for an operator.", itemsOf(ref("Command")))}},
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
		ops = append(ops, op{id: action + "Command", method: "post", path: "/api/tsq/commands/{id}/" + action, summary: b.summary, tag: "tsq", operator: true,
			params: []object{id}, body: b.schema, example: b.example,
			responses: object{"200": jsonResponse("The command after the action.", ref("Command")), "404": problem("No such command."),
				"409": problem("The command is not in the troubleshooting queue.")}})
	}
	ops = append(ops, op{id: "listProcessTSQ", method: "get", path: "/api/tsq/processes", summary: "Executions in the troubleshooting queue, newest first", tag: "tsq",
		params:    []object{textParam("domain", "only this domain"), textParam("type", "only this process type"), limitParam(defaultListLimit, maxListLimit)},
		responses: object{"200": jsonResponse("Executions waiting for an operator, without their logs.", itemsOf(ref("ExecutionSummary")))}})
	processBodies := map[string]struct {
		schema, summary, description string
		example                      object
	}{
		"retry": {"ProcessRetry", "Retry an execution (audited)", "The execution runs again from the top with a fresh attempt budget for the step it stopped at.",
			object{"reason": exampleReason}},
		"cancel": {"ProcessCancel", "Cancel an execution, optionally running its compensations first (audited)", "",
			object{"reason": "The customer withdrew the payment.", "runCompensations": true}},
		"complete": {"ProcessComplete", "Force-complete an execution (audited)",
			"The execution ends COMPLETED with the given state fields set first. A payment is completed only on the evidence that it was made: stateOverrides.evidence is required for PaymentStep and PaymentManager executions, as in the console.",
			object{"reason": "Confirmed by the beneficiary bank.", "stateOverrides": object{"evidence": "SWIFT gpi tracker shows ACSC"}}},
		"skip": {"ProcessSkip", "Complete the step an execution is at with a given result (audited)", "step must be the step the execution is at.",
			object{"reason": "Hold placed by hand in the core banking system.", "step": payments.StepNameCheckBalance, "result": object{"holdId": "HOLD-MANUAL-1"}}},
	}
	for _, action := range processTSQActions {
		b := processBodies[action]
		ops = append(ops, op{id: action + "Process", method: "post", path: "/api/tsq/processes/{id}/" + action, summary: b.summary, description: b.description,
			tag: "tsq", operator: true, params: []object{id}, body: b.schema, example: b.example,
			responses: object{"200": jsonResponse("The execution after the action.", ref("Execution")), "404": problem("No such execution."),
				"409": problem("Not in a state the action applies to, or a runner holds it right now.")}})
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
		responses := object{}
		for status, response := range o.responses {
			responses[status] = response
		}
		operation := object{"operationId": o.id, "summary": o.summary, "tags": []string{o.tag}, "responses": responses}
		if o.description != "" {
			operation["description"] = o.description
		}
		if o.params != nil {
			operation["parameters"] = o.params
		}
		if o.params != nil || o.body != "" {
			responses["400"] = problem("Invalid input: each problem names its field; nothing was changed.")
		} else if o.id != "getHealth" && o.id != "getReadiness" {
			responses["400"] = problem("The route takes no query parameters.")
		}
		if o.body != "" {
			media := object{"schema": ref(o.body)}
			if o.example != nil {
				media["example"] = o.example
			}
			operation["requestBody"] = object{"required": false, "content": object{"application/json": media}}
			responses["413"] = problem("The body is larger than 64 KiB.")
			responses["415"] = problem("The body is not JSON.")
		}
		if !o.public {
			role := "viewer"
			if o.operator {
				role = "operator"
			}
			operation["security"] = []object{{"bearer": []string{}}}
			operation["x-required-role"] = role
			responses["401"] = problem("No valid bearer token in the Authorization header (the console's session cookie is not accepted).")
			if o.operator {
				responses["403"] = problem("The token's role is viewer; operator is required.")
			}
		}
		responses["500"] = problem("The server failed; the detail gives the error id it logged.")
		item[o.method] = operation
	}
	return object{
		"openapi": "3.0.3",
		"info": object{"title": "commandbus API", "version": "1.0.0",
			"description": strings.Join([]string{
				"Reliable multi-step business processes on PostgreSQL: the reference payments platform, both troubleshooting queues, and operations.",
				"Every error is application/problem+json with a stable code, an unknown route included (404), and a method a route does not take (405, with an Allow header).",
				"Request bodies are one JSON object of at most 64 KiB with no unknown field and nothing after it; query parameters a route does not take are refused.",
				"Mutating calls need an operator token and are audited with its subject; the bearer scheme is case-insensitive.",
			}, " ")},
		"paths": paths,
		"components": object{
			"securitySchemes": object{"bearer": object{"type": "http", "scheme": "bearer", "description": "Tokens are configured in server.tokens with the role viewer or operator."}},
			"schemas":         schemas(),
		},
	}
}

// reasonAnnotation documents the reason every operator action carries.
var reasonAnnotation = object{"description": "why the action is taken; recorded in the audit log",
	"minLength": 1, "maxLength": commandbus.MaxReasonLength}

func schemas() object {
	processTypes := object{"type": "string", "enum": payments.ProcessTypes, "default": payments.TypePaymentStep}
	return object{
		"Problem":          annotate(schemaOf[Problem](), map[string]object{"code": {"description": "stable machine-readable code, such as VALIDATION_FAILED"}, "errors": {"description": "the invalid fields"}}),
		"Command":          schemaOf[commandbus.CommandRow](),
		"Execution":        schemaOf[process.InstanceJSON](),
		"ExecutionSummary": schemaOf[driver.ExecutionRow](),
		"CommandAction":    annotate(requestSchemaOf[commandActionRequest](), map[string]object{"reason": reasonAnnotation}),
		"CommandComplete":  annotate(requestSchemaOf[commandCompleteRequest](), map[string]object{"reason": reasonAnnotation, "result": {"description": "the command's result, as its handler would have replied"}}),
		"ProcessRetry":     annotate(requestSchemaOf[processRetryRequest](), map[string]object{"reason": reasonAnnotation}),
		"ProcessCancel": annotate(requestSchemaOf[processCancelRequest](), map[string]object{"reason": reasonAnnotation,
			"runCompensations": {"description": "run the compensations of the completed steps, in reverse order, before ending CANCELLED", "default": false}}),
		"ProcessComplete": annotate(requestSchemaOf[processCompleteRequest](), map[string]object{"reason": reasonAnnotation,
			"stateOverrides": {"description": "top-level state fields to set first; a payment needs evidence (a printable text)", "additionalProperties": true}}),
		"ProcessSkip": annotate(requestSchemaOf[processSkipRequest](), map[string]object{"reason": reasonAnnotation,
			"step": {"description": "the step the execution is at", "minLength": 1, "maxLength": 200}, "result": {"description": "the step's result, shaped as the step returns it"}}),
		"PaymentRequest": annotate(requestSchemaOf[payments.PaymentRequest](), map[string]object{
			"idempotencyKey": {"description": "the client's key; a second request with it creates nothing and answers 409 naming the first payment", "minLength": 1, "maxLength": 200},
			"debitAccount":   {"description": "a customer account in the debit currency", "minLength": 1, "maxLength": 200},
			"creditAccount":  {"description": "a beneficiary or customer account in the credit currency", "minLength": 1, "maxLength": 200},
			"amount": {"description": "a plain decimal in the debit currency with at most its minor units (2 for USD, 0 for JPY), at most Options.MaxAmounts (default about ten million US dollars); no sign, exponent or separators",
				"pattern": `^[0-9]{1,18}(\.[0-9]{1,18})?$`},
			"currency":       {"description": "ISO 4217 code of the debit currency: " + strings.Join(payments.Currencies, ", "), "pattern": "^[A-Za-z]{3}$"},
			"creditCurrency": {"description": "ISO 4217 code of the beneficiary's currency; default currency. Another currency books FX", "pattern": "^[A-Za-z]{3}$"},
			"valueDate":      {"description": "default today; not in the past, at most a year ahead", "format": "date"},
			"cutoff":         {"description": "when the payment must be done (default four hours after acceptance); past it the payment compensates. At most a year ahead"},
			"processType":    processTypes,
			"behavior":       ref("Behavior"),
			"behaviorPreset": {"description": "a simulator preset; give it or behavior, not both", "enum": []string{payments.PresetHappy, payments.PresetRealistic, payments.PresetChaos}},
		}),
		"Behavior": annotate(requestSchemaOf[payments.Behavior](), map[string]object{
			"name":  {"description": "a preset's name or a label of your own", "maxLength": 100},
			"steps": {"description": "behavior per simulated step: " + strings.Join(payments.BehaviorSteps, ", ")},
		}),
		"BatchRequest": annotate(requestSchemaOf[batchRequest](), map[string]object{
			"count":          {"description": "how many payments to generate", "minimum": 1, "maximum": payments.MaxBatchCount},
			"day":            {"description": "the payments' value date; default today; not in the past, at most a year ahead", "format": "date"},
			"processType":    processTypes,
			"behavior":       ref("Behavior"),
			"behaviorPreset": {"description": "a simulator preset; give it or behavior, not both", "enum": []string{payments.PresetHappy, payments.PresetRealistic, payments.PresetChaos}},
		}),
		"DecisionRequest": annotate(requestSchemaOf[decisionRequest](), map[string]object{"reason": reasonAnnotation}),
		"NetworkAnswer": annotate(requestSchemaOf[respondRequest](), map[string]object{
			"answer":  {"description": "ACCEPT confirms the level; REJECT fails the payment, which compensates. Give answer or success", "enum": []string{payments.AnswerAccept, payments.AnswerReject}},
			"success": {"description": "the older form of answer: true for ACCEPT, false for REJECT", "deprecated": true},
			"reason":  reasonAnnotation,
		}),
		"Payment":        schemaOf[payments.PaymentView](),
		"PaymentResult":  schemaOf[payments.PaymentResult](),
		"PaymentStatus":  schemaOf[payments.PaymentStatus](),
		"Batch":          schemaOf[payments.BatchView](),
		"Approval":       schemaOf[payments.Approval](),
		"NetworkPending": schemaOf[payments.PendingNetworkResponse](),
	}
}

func paymentOperations() []op {
	id := pathParam("id", "resource id")
	return []op{
		{id: "submitPayment", method: "post", path: "/api/payments", summary: "Submit a payment", tag: "payments", operator: true, body: "PaymentRequest",
			description: "The payment and its process are recorded in one transaction, then the process runs in the request until it completes (200) or waits (202).",
			example: object{"idempotencyKey": "invoice-2026-0001", "debitAccount": "CUST-EUR-001", "creditAccount": "BENE-USD-001",
				"amount": "1250.50", "currency": "EUR", "creditCurrency": "USD", "processType": payments.TypePaymentStep},
			responses: object{"200": jsonResponse("Completed at once.", ref("PaymentResult")), "202": jsonResponse("Accepted; the process runs on.", ref("PaymentResult")),
				"409": problem("Duplicate idempotency key; existingId names the original.")}},
		{id: "listPayments", method: "get", path: "/api/payments", summary: "List payments, newest first", tag: "payments",
			params: []object{enumParam("status", "only payments in this status", payments.PaymentStatuses(), "COMPLETED"),
				enumParam("processType", "only this process", payments.ProcessTypes, ""),
				uuidParam("batch", "only this batch"), limitParam(50, maxListLimit)},
			responses: object{"200": jsonResponse("Payments.", itemsOf(ref("Payment")))}},
		{id: "getPayment", method: "get", path: "/api/payments/{id}", summary: "A payment: status, risk, FX, L1–L4, error", tag: "payments", params: []object{id},
			responses: object{"200": jsonResponse("The payment.", ref("Payment")), "404": problem("No such payment.")}},
		{id: "getPaymentStatus", method: "get", path: "/api/payments/{processId}/status", summary: "The status of a payment's process", tag: "payments",
			description: "Addressed by the process (execution) id that submitting the payment returned: where the process is, whether risk approved it, which network levels arrived, and its error.",
			params:      []object{pathParam("processId", "the payment's process (execution) id")},
			responses:   object{"200": jsonResponse("The process status.", ref("PaymentStatus")), "404": problem("No payment process has this id.")}},
		{id: "createBatch", method: "post", path: "/api/batches", summary: "Generate and run a batch of payments", tag: "batches", operator: true, body: "BatchRequest",
			example:   object{"count": 10, "processType": payments.TypePaymentManager, "behaviorPreset": payments.PresetHappy},
			responses: object{"201": jsonResponse("The batch.", ref("Batch"))}},
		{id: "listBatches", method: "get", path: "/api/batches", summary: "List batches, newest first", tag: "batches", params: []object{limitParam(50, maxBatchListLimit)},
			responses: object{"200": jsonResponse("Batches.", itemsOf(ref("Batch")))}},
		{id: "getBatch", method: "get", path: "/api/batches/{id}", summary: "A batch with its counts", tag: "batches", params: []object{id},
			responses: object{"200": jsonResponse("The batch.", ref("Batch")), "404": problem("No such batch.")}},
		{id: "listApprovals", method: "get", path: "/api/approvals", summary: "Risk approvals, oldest first", tag: "approvals",
			params: []object{enumParam("status", "approvals in this status; default PENDING", payments.ApprovalStatuses, payments.ApprovalPending),
				limitParam(defaultListLimit, maxListLimit)},
			responses: object{"200": jsonResponse("Approvals.", itemsOf(ref("Approval")))}},
		{id: "approveApproval", method: "post", path: "/api/approvals/{id}/approve", summary: "Approve (audited)", tag: "approvals", operator: true, params: []object{id},
			body: "DecisionRequest", example: object{"reason": "Customer confirmed the payment by phone."},
			responses: object{"200": jsonResponse("Approved.", ref("Approval")), "404": problem("No such approval."), "409": problem("Already decided.")}},
		{id: "rejectApproval", method: "post", path: "/api/approvals/{id}/reject", summary: "Reject (audited)", tag: "approvals", operator: true, params: []object{id},
			body: "DecisionRequest", example: object{"reason": "Beneficiary on the watch list."},
			responses: object{"200": jsonResponse("Rejected; the payment compensates.", ref("Approval")), "404": problem("No such approval."), "409": problem("Already decided.")}},
		{id: "listPendingNetworkResponses", method: "get", path: "/api/network/pending", summary: "Network confirmations waiting for an operator, oldest first", tag: "network",
			params:    []object{limitParam(defaultListLimit, maxListLimit)},
			responses: object{"200": jsonResponse("Pending responses.", itemsOf(ref("NetworkPending")))}},
		{id: "respondToNetworkResponse", method: "post", path: "/api/network/pending/{id}/respond", summary: "Answer a pending network confirmation (audited)", tag: "network",
			operator: true, params: []object{id}, body: "NetworkAnswer", example: object{"answer": payments.AnswerAccept, "reason": "The network confirmed L2 by phone."},
			responses: object{"200": jsonResponse("Answered: the response as stored now.", ref("NetworkPending")), "404": problem("No such pending response."),
				"409": problem("Already answered.")}},
	}
}
