package paymentsweb

import (
	"slices"
	"strings"

	"github.com/commandbus/commandbus/examples/payments"
	"github.com/commandbus/commandbus/server"
)

type object = map[string]any

// schemas are the payment schemas of the OpenAPI document.
func schemas() map[string]any {
	processTypes := object{"type": "string", "enum": payments.ProcessTypes, "default": payments.TypePaymentStep}
	return object{
		"PaymentRequest": optional(server.Annotate(server.RequestSchemaOf[payments.PaymentRequest](), map[string]map[string]any{
			"idempotencyKey": {"description": "the client's key, required here or in the Idempotency-Key header (equal when both are given). A repeat with the key and the same body creates nothing and replays the first answer (header Idempotent-Replayed: true); with another body it answers 409 IDEMPOTENCY_KEY_REUSED naming the fields that differ", "minLength": 1, "maxLength": 200},
			"debitAccount":   {"description": "a customer account in the debit currency", "minLength": 1, "maxLength": 200},
			"creditAccount":  {"description": "a beneficiary or customer account in the credit currency", "minLength": 1, "maxLength": 200},
			"amount": {"description": "a plain decimal in the debit currency with at most its minor units (2 for USD, 0 for JPY), at most Options.MaxAmounts (default about ten million US dollars); no sign, exponent or separators",
				"pattern": `^[0-9]{1,18}(\.[0-9]{1,18})?$`},
			"currency":       {"description": "ISO 4217 code of the debit currency: " + strings.Join(payments.Currencies, ", "), "pattern": "^[A-Za-z]{3}$"},
			"creditCurrency": {"description": "ISO 4217 code of the beneficiary's currency; default currency. Another currency books FX", "pattern": "^[A-Za-z]{3}$"},
			"valueDate":      {"description": "default today; not in the past, at most a year ahead", "format": "date"},
			"cutoff":         {"description": "when the payment must be done (default four hours after acceptance); past it the payment compensates. At most a year ahead"},
			"processType":    processTypes,
			"behavior":       server.Ref("Behavior"),
			"behaviorPreset": {"description": "a simulator preset; give it or behavior, not both", "enum": []string{payments.PresetHappy, payments.PresetRealistic, payments.PresetChaos}},
		}), "idempotencyKey"),
		"Behavior": server.Annotate(server.RequestSchemaOf[payments.Behavior](), map[string]map[string]any{
			"name":  {"description": "a preset's name or a label of your own", "maxLength": 100},
			"steps": {"description": "behavior per simulated step: " + strings.Join(payments.BehaviorSteps, ", ")},
		}),
		"BatchRequest": server.Annotate(server.RequestSchemaOf[batchRequest](), map[string]map[string]any{
			"count":          {"description": "how many payments to generate", "minimum": 1, "maximum": payments.MaxBatchCount},
			"day":            {"description": "the payments' value date; default today; not in the past, at most a year ahead", "format": "date"},
			"processType":    processTypes,
			"behavior":       server.Ref("Behavior"),
			"behaviorPreset": {"description": "a simulator preset; give it or behavior, not both", "enum": []string{payments.PresetHappy, payments.PresetRealistic, payments.PresetChaos}},
		}),
		"DecisionRequest": server.Annotate(server.RequestSchemaOf[decisionRequest](), map[string]map[string]any{"reason": server.ReasonSchema()}),
		"NetworkAnswer": server.Annotate(server.RequestSchemaOf[respondRequest](), map[string]map[string]any{
			"answer":  {"description": "ACCEPT confirms the level; REJECT fails the payment, which compensates. Give answer or success", "enum": []string{payments.AnswerAccept, payments.AnswerReject}},
			"success": {"description": "the older form of answer: true for ACCEPT, false for REJECT", "deprecated": true},
			"reason":  server.ReasonSchema(),
		}),
		"Payment":        server.SchemaOf[payments.PaymentView](),
		"PaymentResult":  server.SchemaOf[payments.PaymentResult](),
		"PaymentStatus":  server.SchemaOf[payments.PaymentStatus](),
		"Batch":          server.SchemaOf[payments.BatchView](),
		"Approval":       server.SchemaOf[payments.Approval](),
		"NetworkPending": server.SchemaOf[payments.PendingNetworkResponse](),
	}
}

// operations are the payment routes of the OpenAPI document.
func operations() []server.Operation {
	id := server.PathParam("id", "resource id")
	return []server.Operation{
		{ID: "submitPayment", Method: "post", Path: "/api/payments", Summary: "Submit a payment", Tag: "payments", Operator: true, Body: "PaymentRequest",
			Description: "The payment and its process are recorded in one transaction, then the process runs in the request until it completes (200) or waits (202). " +
				"The idempotency key comes in the body or the Idempotency-Key header: a repeat with the same body replays the first answer, its status included; with another body it is a 409.",
			Params: []map[string]any{{"name": IdempotencyKeyHeader, "in": "header", "required": false,
				"description": "the idempotency key (IETF draft-ietf-httpapi-idempotency-key-header), a structured-field string or the bare key; instead of, or equal to, the body's idempotencyKey",
				"schema":      object{"type": "string", "minLength": 1, "maxLength": 202}, "example": `"invoice-2026-0001"`}},
			Example: object{"idempotencyKey": "invoice-2026-0001", "debitAccount": "CUST-EUR-001", "creditAccount": "BENE-USD-001",
				"amount": "1250.50", "currency": "EUR", "creditCurrency": "USD", "processType": payments.TypePaymentStep},
			Responses: object{"200": server.JSONResponse("Completed at once.", server.Ref("PaymentResult")), "202": server.JSONResponse("Accepted; the process runs on.", server.Ref("PaymentResult")),
				"409": server.ProblemResponse("The idempotency key was used for another request (IDEMPOTENCY_KEY_REUSED: errors name the fields that differ; existingId names the payment), or by a payment whose request was not recorded (DUPLICATE_IDEMPOTENCY_KEY).")}},
		{ID: "listPayments", Method: "get", Path: "/api/payments", Summary: "List payments, newest first", Tag: "payments",
			Description: "Paged: pass next as cursor for the following page; hasMore says whether there is one. Newest created first; filtered by a process status (WAITING, IN_TSQ, …), newest process first. A cursor resumes the list it came from, with the same filter.",
			Params: []map[string]any{server.EnumParam("status", "only payments in this status", payments.PaymentStatuses(), "COMPLETED"),
				server.EnumParam("processType", "only this process", payments.ProcessTypes, ""),
				server.UUIDParam("batch", "only this batch"), server.CursorParam(), server.LimitParam(defaultPaymentListLimit, server.MaxListLimit)},
			Responses: object{"200": server.JSONResponse("A page of payments.", server.PageSchema(server.Ref("Payment")))}},
		{ID: "getPayment", Method: "get", Path: "/api/payments/{id}", Summary: "A payment: status, risk, FX, L1–L4, error", Tag: "payments", Params: []map[string]any{id},
			Responses: object{"200": server.JSONResponse("The payment.", server.Ref("Payment")), "404": server.ProblemResponse("No such payment.")}},
		{ID: "getPaymentStatus", Method: "get", Path: "/api/payments/{processId}/status", Summary: "The status of a payment's process", Tag: "payments",
			Description: "Addressed by the process (execution) id that submitting the payment returned: where the process is, whether risk approved it, which network levels arrived, and its error.",
			Params:      []object{server.PathParam("processId", "the payment's process (execution) id")},
			Responses:   object{"200": server.JSONResponse("The process status.", server.Ref("PaymentStatus")), "404": server.ProblemResponse("No payment process has this id.")}},
		{ID: "createBatch", Method: "post", Path: "/api/batches", Summary: "Generate and run a batch of payments", Tag: "batches", Operator: true, Body: "BatchRequest",
			Example:   object{"count": 10, "processType": payments.TypePaymentManager, "behaviorPreset": payments.PresetHappy},
			Responses: object{"201": server.JSONResponse("The batch.", server.Ref("Batch"))}},
		{ID: "listBatches", Method: "get", Path: "/api/batches", Summary: "List batches, newest first", Tag: "batches",
			Description: "Paged: pass next as cursor for the following page; hasMore says whether there is one. Each batch is counted when read, so a page holds at most 200.",
			Params:      []map[string]any{server.CursorParam(), server.LimitParam(defaultPaymentListLimit, maxBatchListLimit)},
			Responses:   object{"200": server.JSONResponse("A page of batches.", server.PageSchema(server.Ref("Batch")))}},
		{ID: "getBatch", Method: "get", Path: "/api/batches/{id}", Summary: "A batch with its counts", Tag: "batches", Params: []map[string]any{id},
			Responses: object{"200": server.JSONResponse("The batch.", server.Ref("Batch")), "404": server.ProblemResponse("No such batch.")}},
		{ID: "listApprovals", Method: "get", Path: "/api/approvals", Summary: "Risk approvals, oldest first", Tag: "approvals",
			Description: "Paged: pass next as cursor for the following page; hasMore says whether there is one. Oldest request first, the order to decide them in.",
			Params: []map[string]any{server.EnumParam("status", "approvals in this status; default PENDING", payments.ApprovalStatuses, payments.ApprovalPending),
				server.CursorParam(), server.LimitParam(server.DefaultListLimit, server.MaxListLimit)},
			Responses: object{"200": server.JSONResponse("A page of approvals.", server.PageSchema(server.Ref("Approval")))}},
		{ID: "approveApproval", Method: "post", Path: "/api/approvals/{id}/approve", Summary: "Approve (audited)", Tag: "approvals", Operator: true, Params: []map[string]any{id},
			Body: "DecisionRequest", Example: object{"reason": "Customer confirmed the payment by phone."},
			Responses: object{"200": server.JSONResponse("Approved.", server.Ref("Approval")), "404": server.ProblemResponse("No such approval."), "409": server.ProblemResponse("Already decided.")}},
		{ID: "rejectApproval", Method: "post", Path: "/api/approvals/{id}/reject", Summary: "Reject (audited)", Tag: "approvals", Operator: true, Params: []map[string]any{id},
			Body: "DecisionRequest", Example: object{"reason": "Beneficiary on the watch list."},
			Responses: object{"200": server.JSONResponse("Rejected; the payment compensates.", server.Ref("Approval")), "404": server.ProblemResponse("No such approval."), "409": server.ProblemResponse("Already decided.")}},
		{ID: "listPendingNetworkResponses", Method: "get", Path: "/api/network/pending", Summary: "Network confirmations waiting for an operator, oldest first", Tag: "network",
			Description: "Paged: pass next as cursor for the following page; hasMore says whether there is one.",
			Params:      []object{server.CursorParam(), server.LimitParam(server.DefaultListLimit, server.MaxListLimit)},
			Responses:   object{"200": server.JSONResponse("A page of pending responses.", server.PageSchema(server.Ref("NetworkPending")))}},
		{ID: "respondToNetworkResponse", Method: "post", Path: "/api/network/pending/{id}/respond", Summary: "Answer a pending network confirmation (audited)", Tag: "network",
			Operator: true, Params: []map[string]any{id}, Body: "NetworkAnswer", Example: object{"answer": payments.AnswerAccept, "reason": "The network confirmed L2 by phone."},
			Responses: object{"200": server.JSONResponse("Answered: the response as stored now.", server.Ref("NetworkPending")), "404": server.ProblemResponse("No such pending response."),
				"409": server.ProblemResponse("Already answered.")}},
	}
}

// optional takes names off a schema's required properties: the property may be given another way.
func optional(schema map[string]any, names ...string) map[string]any {
	required, _ := schema["required"].([]string)
	kept := make([]string, 0, len(required))
	for _, name := range required {
		if !slices.Contains(names, name) {
			kept = append(kept, name)
		}
	}
	schema["required"] = kept
	return schema
}
