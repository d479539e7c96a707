package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/google/uuid"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/input"
	"github.com/commandbus/commandbus/orchestration"
	"github.com/commandbus/commandbus/server/internal/httpx"
)

// The generic surface: definitions and executions of every model (processes, workflows) through
// the orchestration runtime, by (model, type) and by id.

type (
	// startRequest starts an execution of a definition from JSON.
	startRequest struct {
		Input       json.RawMessage   `json:"input,omitempty"`
		ID          string            `json:"id,omitempty"`
		BusinessKey string            `json:"businessKey,omitempty"`
		Tenant      string            `json:"tenant,omitempty"`
		Attributes  map[string]string `json:"attributes,omitempty"`
		DryRun      bool              `json:"dryRun,omitempty"`
	}
	// startResponse names the execution a start created (or found, for an id that existed).
	startResponse struct {
		ID    uuid.UUID `json:"id"`
		Model string    `json:"model"`
		Type  string    `json:"type"`
	}
	// suspendRequest suspends or resumes an execution.
	suspendRequest struct {
		Reason string `json:"reason"`
	}
	// signalRequest sends a signal.
	signalRequest struct {
		Payload  json.RawMessage `json:"payload,omitempty"`
		SignalID string          `json:"signalId,omitempty"`
	}
	// signalResponse reports a sent signal.
	signalResponse struct {
		SignalID  string `json:"signalId"`
		Duplicate bool   `json:"duplicate"`
	}
	// timerCancelRequest cancels a timer.
	timerCancelRequest struct {
		Reason string `json:"reason"`
	}
	// executionPage is a page of executions, newest first.
	executionPage = page[*driver.ExecutionRow]
	// tsqPage is a page of the executions waiting for an operator, with their count.
	tsqPage struct {
		Items   []*driver.ExecutionRow `json:"items"`
		Next    string                 `json:"next,omitempty"`
		HasMore bool                   `json:"hasMore"`
		Count   int64                  `json:"count"`
	}
)

// executionActions are the actions of /api/executions/{id}/{action}.
var executionActions = []string{"retry", "cancel", "complete", "skip", "suspend", "resume"}

// runtime returns the server's runtime or a not-found error naming what is missing.
func (s *Server) runtime() (*orchestration.Runtime, error) {
	if s.cfg.Runtime == nil {
		return nil, fmt.Errorf("%w: this server runs no orchestration runtime", commandbus.ErrNotFound)
	}
	return s.cfg.Runtime, nil
}

// definitionOps finds the operations of the path's (model, type).
func (s *Server) definitionOps(r *http.Request) (orchestration.Operations, error) {
	rt, err := s.runtime()
	if err != nil {
		return nil, err
	}
	model, typ := r.PathValue("model"), r.PathValue("type")
	if ops := rt.Operations(model, typ); ops != nil {
		return ops, nil
	}
	return nil, fmt.Errorf("%w: no definition %s/%s is registered", commandbus.ErrNotFound, input.Quote(model), input.Quote(typ))
}

func (s *Server) listDefinitions(w http.ResponseWriter, r *http.Request) {
	if err := parseQuery(r).err(); err != nil {
		s.writeError(w, r, err)
		return
	}
	var defs []orchestration.Definition
	if s.cfg.Runtime != nil {
		for _, ops := range s.cfg.Runtime.All() {
			defs = append(defs, s.cfg.Runtime.Describe(ops))
		}
	}
	httpx.WriteJSON(w, http.StatusOK, httpx.Items(defs))
}

func (s *Server) getDefinition(w http.ResponseWriter, r *http.Request) {
	ops, err := s.definitionOps(r)
	if err == nil {
		err = parseQuery(r).err()
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, s.cfg.Runtime.Describe(ops))
}

func (s *Server) startDefinition(w http.ResponseWriter, r *http.Request) {
	ops, err := s.definitionOps(r)
	if err == nil {
		err = parseQuery(r).err()
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var req startRequest
	if err := decodeBody(w, r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	start := orchestration.StartRequest{Input: req.Input, DryRun: req.DryRun, Attributes: req.Attributes}
	var problems []error
	if req.ID != "" {
		if start.ID, err = uuid.Parse(req.ID); err != nil {
			problems = append(problems, &commandbus.ValidationError{Field: "id", Message: "must be a UUID, got " + input.Quote(req.ID)})
		}
	}
	for field, v := range map[string]*string{"businessKey": &req.BusinessKey, "tenant": &req.Tenant} {
		if msg := input.Identifier.Check(*v); msg != "" {
			problems = append(problems, &commandbus.ValidationError{Field: field, Message: msg})
		}
	}
	start.BusinessKey, start.TenantID = req.BusinessKey, req.Tenant
	if err := checkJSONText("input", req.Input); err != nil {
		problems = append(problems, err)
	}
	if err := driver.ValidateAttributes(req.Attributes); err != nil {
		problems = append(problems, &commandbus.ValidationError{Field: "attributes", Message: err.Error()})
	}
	starter, ok := ops.(orchestration.Starter)
	if !ok {
		problems = append(problems, &commandbus.ValidationError{Field: "type", Message: ops.Model() + " " + ops.Type() + " cannot be started through the API"})
	}
	if err := errors.Join(problems...); err != nil {
		s.writeError(w, r, err)
		return
	}
	id, err := starter.StartJSON(r.Context(), start)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.cfg.Logger.Info("execution started through the API", "execution_id", id, "model", ops.Model(), "type", ops.Type(), "by", httpx.Subject(r))
	w.Header().Set("Location", "/api/executions/"+id.String())
	httpx.WriteJSON(w, http.StatusCreated, startResponse{ID: id, Model: ops.Model(), Type: ops.Type()})
}

// withoutAttributes returns r with its attr.* query parameters removed, and those parameters as
// search attributes. A repeated attribute is a problem.
func withoutAttributes(r *http.Request) (*http.Request, map[string]string, error) {
	values := r.URL.Query()
	attrs := map[string]string{}
	var problems []error
	for name, vs := range values {
		key, ok := strings.CutPrefix(name, "attr.")
		if !ok {
			continue
		}
		delete(values, name)
		if len(vs) > 1 {
			problems = append(problems, &commandbus.ValidationError{Field: name, Message: "is given more than once"})
			continue
		}
		attrs[key] = vs[0]
	}
	if err := driver.ValidateAttributeSearch(attrs); err != nil && len(attrs) > 0 {
		problems = append(problems, &commandbus.ValidationError{Field: "attr", Message: err.Error()})
	}
	clone := r.Clone(r.Context())
	u := *r.URL
	u.RawQuery = url.Values(values).Encode()
	clone.URL = &u
	return clone, attrs, errors.Join(problems...)
}

func (s *Server) listExecutions(w http.ResponseWriter, r *http.Request) {
	plain, attrs, attrErr := withoutAttributes(r)
	q := parseQuery(plain, "model", "type", "status", "domain", "tenant", "businessKey", "parent", "cursor", "before", "limit")
	params := &driver.ExecutionListParams{
		Model: q.text("model"), Type: q.text("type"), Domain: q.text("domain"), TenantID: q.text("tenant"),
		BusinessKey: q.text("businessKey"), ParentID: q.uuid("parent"), BeforeID: q.cursor(),
		Limit: q.limit(defaultListLimit, maxListLimit),
	}
	if before := q.first("before"); before != "" {
		// The older spelling: an execution id, or a cursor.
		if key, err := decodeCursor(before); err == nil {
			params.BeforeID, err = uuid.Parse(key)
			if err != nil {
				q.badCursor(before)
			}
		} else {
			params.BeforeID = q.uuid("before")
		}
	}
	if len(attrs) > 0 {
		params.Attributes = attrs
	}
	if status := q.text("status"); status != "" {
		for _, st := range strings.Split(status, ",") {
			st := driver.ExecutionStatus(strings.TrimSpace(st))
			if !st.Valid() {
				q.bad("status", "must be execution statuses separated by commas, got "+input.Quote(string(st)))
				break
			}
			params.Statuses = append(params.Statuses, st)
		}
	}
	if err := errors.Join(q.err(), attrErr); err != nil {
		s.writeError(w, r, err)
		return
	}
	limit := params.Limit
	params.Limit++ // one more tells whether there is a next page
	rows, err := s.cfg.Client.Driver().Executor().ExecutionList(r.Context(), params)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, pageOf(rows, limit, executionID))
}

func (s *Server) getExecution(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r)
	if err == nil {
		err = parseQuery(r).err()
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	exec := s.cfg.Client.Driver().Executor()
	row, err := exec.ExecutionGet(r.Context(), id)
	if err != nil {
		s.writeError(w, r, notFoundAs(err, "execution", id))
		return
	}
	if ops := s.operationsFor(row); ops != nil {
		s.writeInstance(w, r, ops, id)
		return
	}
	// No runtime here for its type: the stored execution and its log still answer.
	log, err := exec.ExecutionLogList(r.Context(), id)
	if log == nil {
		log = []*driver.ExecutionLogEntry{}
	}
	s.reply(w, r, http.StatusOK, orchestration.InstanceJSON{ExecutionRow: row, Log: log}, err)
}

func (s *Server) actOnExecution(w http.ResponseWriter, r *http.Request) {
	action := r.PathValue("action")
	if !slices.Contains(executionActions, action) {
		unknownAction(w, r, executionActions)
		return
	}
	if action != "suspend" && action != "resume" {
		s.actOnProcess(w, r) // retry, cancel, complete and skip act on any model the same way
		return
	}
	id, err := pathID(r)
	if err == nil {
		err = parseQuery(r).err()
	}
	var req suspendRequest
	if err == nil {
		err = decodeBody(w, r, &req)
	}
	op := commandbus.OperatorAction{Actor: httpx.Subject(r), Reason: req.Reason}
	if err = errors.Join(err, op.Validate()); err != nil {
		s.writeError(w, r, err)
		return
	}
	_, ops, err := s.operations(r.Context(), id)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if action == "suspend" {
		err = ops.Suspend(r.Context(), id, op)
	} else {
		err = ops.Resume(r.Context(), id, op)
	}
	if err != nil {
		s.writeError(w, r, notFoundAs(err, "execution", id))
		return
	}
	s.writeInstance(w, r, ops, id)
}

// executionTarget reads what every per-execution route reads: the runtime, the path's id, no
// query parameter, and the JSON body into body when it is not nil.
func (s *Server) executionTarget(w http.ResponseWriter, r *http.Request, body any) (*orchestration.Runtime, uuid.UUID, error) {
	rt, err := s.runtime()
	var id uuid.UUID
	if err == nil {
		id, err = pathID(r)
	}
	if err == nil {
		err = parseQuery(r).err()
	}
	if err == nil && body != nil {
		err = decodeBody(w, r, body)
	}
	return rt, id, err
}

func (s *Server) signalExecution(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	var req signalRequest
	rt, id, err := s.executionTarget(w, r, &req)
	if err == nil {
		var problems []error
		if msg := input.Identifier.Check(name); msg != "" || name == "" {
			problems = append(problems, &commandbus.ValidationError{Field: "name", Message: "a signal name is required: " + msg})
		}
		if msg := input.Identifier.Check(req.SignalID); msg != "" {
			problems = append(problems, &commandbus.ValidationError{Field: "signalId", Message: msg})
		}
		problems = append(problems, checkJSONText("payload", req.Payload))
		err = errors.Join(problems...)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	sent, duplicate, err := rt.Signal(r.Context(), id, name, req.Payload, req.SignalID)
	if err != nil {
		s.writeError(w, r, notFoundAs(err, "execution", id))
		return
	}
	s.cfg.Logger.Info("signal sent through the API", "execution_id", id, "signal", name, "signal_id", sent, "duplicate", duplicate, "by", httpx.Subject(r))
	httpx.WriteJSON(w, http.StatusAccepted, signalResponse{SignalID: sent, Duplicate: duplicate})
}

func (s *Server) listExecutionTimers(w http.ResponseWriter, r *http.Request) {
	rt, id, err := s.executionTarget(w, r, nil)
	if err == nil {
		_, err = s.cfg.Client.Driver().Executor().ExecutionGet(r.Context(), id)
		err = notFoundAs(err, "execution", id)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	timers, err := rt.Timers(r.Context(), id)
	s.reply(w, r, http.StatusOK, httpx.Items(timers), err)
}

func (s *Server) cancelExecutionTimer(w http.ResponseWriter, r *http.Request) {
	timer := r.PathValue("timer")
	var req timerCancelRequest
	rt, id, err := s.executionTarget(w, r, &req)
	op := commandbus.OperatorAction{Actor: httpx.Subject(r), Reason: req.Reason}
	if err == nil {
		err = op.Validate()
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := rt.CancelTimer(r.Context(), id, timer, op); err != nil {
		s.writeError(w, r, notFoundAs(err, "execution", id))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) listExecutionTSQ(w http.ResponseWriter, r *http.Request) {
	q := parseQuery(r, "model", "type", "domain", "cursor", "limit")
	params := &driver.ExecutionListParams{
		Statuses: []driver.ExecutionStatus{driver.ExecutionWaitingForTSQ},
		Model:    q.text("model"), Type: q.text("type"), Domain: q.text("domain"), Limit: q.limit(defaultListLimit, maxListLimit),
		BeforeID: q.cursor(),
	}
	if err := q.err(); err != nil {
		s.writeError(w, r, err)
		return
	}
	exec := s.cfg.Client.Driver().Executor()
	limit := params.Limit
	params.Limit++ // one more tells whether there is a next page
	rows, err := exec.ExecutionList(r.Context(), params)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	params.Limit = limit
	counts, err := exec.ExecutionCountByStatus(r.Context())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	cut := pageOf(rows, limit, executionID)
	page := tsqPage{Items: cut.Items, Next: cut.Next, HasMore: cut.HasMore}
	// The counts are by type: a model or domain filter counts the types registered under it.
	matches := func(typ string) bool {
		if params.Type != "" && typ != params.Type {
			return false
		}
		if params.Model == "" && params.Domain == "" {
			return true
		}
		if s.cfg.Runtime == nil {
			return false
		}
		for _, o := range s.cfg.Runtime.All() {
			if o.Type() == typ && (params.Model == "" || o.Model() == params.Model) && (params.Domain == "" || o.Domain() == params.Domain) {
				return true
			}
		}
		return false
	}
	for _, c := range counts {
		if c.Status == driver.ExecutionWaitingForTSQ && matches(c.Type) {
			page.Count += c.Count
		}
	}
	httpx.WriteJSON(w, http.StatusOK, page)
}

// executionOperations documents the generic routes.
func executionOperations() []Operation {
	id := pathParam("id", "execution id")
	model := object{"name": "model", "in": "path", "required": true, "description": "the model: process, workflow", "schema": object{"type": "string"}}
	typ := object{"name": "type", "in": "path", "required": true, "description": "the type within the model", "schema": object{"type": "string"}}
	reason := object{"reason": exampleReason}
	notFound := problem("No such execution.")
	conflict := problem("Not in a state the action applies to, or a runner holds it right now.")
	ops := []Operation{
		{ID: "listDefinitions", Method: "get", Path: "/api/definitions", Summary: "Every registered definition, of every model", Tag: "definitions",
			Description: "Not paged: the definitions are registered in code, so the list is bounded by the binary and answered whole.",
			Responses:   object{"200": jsonResponse("The definitions, with a workflow's topology.", itemsOf(ref("Definition")))}},
		{ID: "getDefinition", Method: "get", Path: "/api/definitions/{model}/{type}", Summary: "A definition with its topology", Tag: "definitions",
			Params:    []object{model, typ},
			Responses: object{"200": jsonResponse("The definition.", ref("Definition")), "404": problem("No such definition.")}},
		{ID: "startDefinition", Method: "post", Path: "/api/definitions/{model}/{type}/start", Summary: "Start an execution from JSON input (idempotent on id)", Tag: "definitions",
			Description: "The execution is created for the runtime's pollers. dryRun walks a workflow's steps, recording each SKIPPED, without running any; a process refuses it.",
			Operator:    true, Params: []object{model, typ}, Body: "StartRequest",
			Example: object{"input": object{"name": "Ada", "email": "ada@example.com", "country": "GB"}, "businessKey": "application-42",
				"attributes": object{"channel": "branch"}},
			Responses: object{"201": jsonResponse("The execution was created (or existed, for a given id).", ref("Started")), "404": problem("No such definition.")}},
		{ID: "listExecutions", Method: "get", Path: "/api/executions", Summary: "Executions of every model, newest first, paged", Tag: "executions",
			Description: "Filter by model, type, status (comma-separated), domain, tenant, business key, parent, and search attributes as attr.KEY=VALUE (all must match). Paged: pass next as cursor for the following page; hasMore says whether there is one.",
			Params: []object{textParam("model", "only this model"), queryParam("type", "only this type", object{"type": "string", "maxLength": 200}, nil),
				queryParam("status", "only these statuses, comma-separated", object{"type": "string", "maxLength": 200}, "COMPLETED,WAITING_FOR_TSQ"),
				textParam("domain", "only this domain"), textParam("tenant", "only this tenant"), textParam("businessKey", "only this business key"),
				uuidParam("parent", "only the children of this execution"), cursorParam(), limitParam(defaultListLimit, maxListLimit),
				deprecated(uuidParam("before", "the older spelling of cursor: the page after this execution id (or a cursor)"))},
			Responses: object{"200": jsonResponse("A page of executions, without their logs.", ref("ExecutionPage"))}},
		{ID: "getExecution", Method: "get", Path: "/api/executions/{id}", Summary: "An execution of any model with its state and log", Tag: "executions",
			Params: []object{id}, Responses: object{"200": jsonResponse("The execution.", ref("Execution")), "404": notFound}},
	}
	bodies := map[string]struct {
		schema, summary string
		example         object
	}{
		"retry":    {"ProcessRetry", "Retry an execution parked in the troubleshooting queue (audited)", reason},
		"cancel":   {"ProcessCancel", "Cancel an execution, optionally running its compensations first (audited)", object{"reason": "The customer withdrew.", "runCompensations": true}},
		"complete": {"ProcessComplete", "Force-complete an execution (audited)", object{"reason": "Confirmed by the beneficiary bank.", "stateOverrides": object{"evidence": "SWIFT gpi tracker shows ACSC"}}},
		"skip":     {"ProcessSkip", "Record a failed step as done with a result (audited)", object{"reason": "Hold placed by hand in the core banking system.", "step": "STEP_CHECK_BALANCE", "result": object{"holdId": "HOLD-MANUAL-1"}}},
		"suspend":  {"ExecutionSuspend", "Suspend an execution: running steps finish, no other starts (audited)", object{"reason": "Hold while the fraud team looks."}},
		"resume":   {"ExecutionSuspend", "Resume a suspended execution where it stopped (audited)", object{"reason": "Fraud team cleared it."}},
	}
	for _, action := range executionActions {
		b := bodies[action]
		ops = append(ops, Operation{ID: action + "Execution", Method: "post", Path: "/api/executions/{id}/" + action, Summary: b.summary, Tag: "executions",
			Operator: true, Params: []object{id}, Body: b.schema, Example: b.example,
			Responses: object{"200": jsonResponse("The execution after the action.", ref("Execution")), "404": notFound, "409": conflict}})
	}
	return append(ops,
		Operation{ID: "signalExecution", Method: "post", Path: "/api/executions/{id}/signals/{name}", Summary: "Send a named signal with a JSON payload", Tag: "executions",
			Description: "A signal sent before the execution waits for it is buffered. A signalId sent before is a no-op (duplicate: true).",
			Operator:    true, Params: []object{id, {"name": "name", "in": "path", "required": true, "description": "the signal name", "schema": object{"type": "string", "maxLength": 200}}},
			Body: "Signal", Example: object{"payload": object{"approvedBy": "ops:ada"}, "signalId": "approval-7"},
			Responses: object{"202": jsonResponse("The signal is recorded.", ref("SignalSent")), "404": notFound, "409": problem("The execution has ended.")}},
		Operation{ID: "listExecutionTimers", Method: "get", Path: "/api/executions/{id}/timers", Summary: "The execution's pending durable timers", Tag: "executions",
			Description: "Not paged: the pending timers of one execution are few (its definition's waits), answered whole.",
			Params:      []object{id}, Responses: object{"200": jsonResponse("Pending timers, earliest first.", itemsOf(ref("Timer"))), "404": notFound}},
		Operation{ID: "cancelExecutionTimer", Method: "delete", Path: "/api/executions/{id}/timers/{timer}", Summary: "Cancel a pending timer (audited)", Tag: "executions",
			Description: "The timer never fires; the execution runs at once and its model decides what that means (a workflow's sleep step ends).",
			Operator:    true, Params: []object{id, {"name": "timer", "in": "path", "required": true, "description": "the timer id", "schema": object{"type": "string", "maxLength": 200}}},
			Body: "TimerCancel", Example: object{"reason": "The customer asked to skip the cooling-off period."},
			Responses: object{"204": object{"description": "The timer is cancelled."}, "404": problem("No such execution or timer."), "409": conflict}},
		Operation{ID: "listExecutionTSQ", Method: "get", Path: "/api/tsq/executions", Summary: "Executions of every model in the troubleshooting queue, with their count", Tag: "tsq",
			Params:    []object{textParam("model", "only this model"), textParam("type", "only this type"), textParam("domain", "only this domain"), cursorParam(), limitParam(defaultListLimit, maxListLimit)},
			Responses: object{"200": jsonResponse("A page of executions waiting for an operator, and how many there are.", ref("ExecutionTSQ"))}},
	)
}

// executionSchemas are the schemas of the generic routes.
func executionSchemas() object {
	return object{
		"Definition":       schemaOf[orchestration.Definition](),
		"StartRequest":     annotate(requestSchemaOf[startRequest](), map[string]object{"input": {"description": "the execution's input: a process's initial state, a workflow's input"}}),
		"Started":          schemaOf[startResponse](),
		"ExecutionPage":    schemaOf[executionPage](),
		"ExecutionTSQ":     schemaOf[tsqPage](),
		"ExecutionSuspend": annotate(requestSchemaOf[suspendRequest](), map[string]object{"reason": reasonAnnotation}),
		"Signal":           annotate(requestSchemaOf[signalRequest](), map[string]object{"payload": {"description": "any JSON value"}}),
		"SignalSent":       schemaOf[signalResponse](),
		"Timer":            schemaOf[driver.ExecutionTimerRow](),
		"TimerCancel":      annotate(requestSchemaOf[timerCancelRequest](), map[string]object{"reason": reasonAnnotation}),
	}
}

// executionID is the cursor key of an execution row.
func executionID(x *driver.ExecutionRow) string { return uuidKey(x.ID) }

// deprecated marks an OpenAPI parameter deprecated.
func deprecated(param object) object {
	param["deprecated"] = true
	return param
}
