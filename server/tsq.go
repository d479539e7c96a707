package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/google/uuid"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/input"
	"github.com/commandbus/commandbus/process"
	"github.com/commandbus/commandbus/server/internal/httpx"
)

// The bodies of troubleshooting-queue actions, one type per action so that a field an action
// does not take is refused rather than ignored.
type (
	// commandActionRequest retries or cancels a command.
	commandActionRequest struct {
		Reason string `json:"reason"`
	}
	// commandCompleteRequest completes a command with the result its handler would have given.
	commandCompleteRequest struct {
		Reason string          `json:"reason"`
		Result json.RawMessage `json:"result,omitempty"`
	}
	// processRetryRequest retries an execution.
	processRetryRequest struct {
		Reason string `json:"reason"`
	}
	// processCancelRequest cancels an execution, with or without its compensations.
	processCancelRequest struct {
		Reason           string `json:"reason"`
		RunCompensations bool   `json:"runCompensations,omitempty"`
	}
	// processCompleteRequest force-completes an execution, setting state fields first.
	processCompleteRequest struct {
		Reason         string         `json:"reason"`
		StateOverrides map[string]any `json:"stateOverrides,omitempty"`
	}
	// processSkipRequest completes the step an execution is at with a given result.
	processSkipRequest struct {
		Reason string          `json:"reason"`
		Step   string          `json:"step"`
		Result json.RawMessage `json:"result,omitempty"`
	}
)

// commandTSQActions and processTSQActions are the actions of each queue, in the order the document
// lists them.
var (
	commandTSQActions = []string{"retry", "cancel", "complete"}
	processTSQActions = []string{"retry", "cancel", "complete", "skip"}
)

func pathID(r *http.Request) (uuid.UUID, error) {
	id, err := uuid.Parse(r.PathValue("id"))
	if err != nil {
		return uuid.Nil, &commandbus.ValidationError{Field: "id", Message: "must be a UUID, got " + input.Quote(r.PathValue("id"))}
	}
	return id, nil
}

// notFoundAs names the resource and id in a not-found error that does not name them yet.
func notFoundAs(err error, what string, id uuid.UUID) error {
	if errors.Is(err, commandbus.ErrNotFound) && err.Error() == commandbus.ErrNotFound.Error() {
		return fmt.Errorf("%w: no %s has id %s", commandbus.ErrNotFound, what, id)
	}
	return err
}

// reply writes v as JSON with status, or err as a problem.
func (s *Server) reply(w http.ResponseWriter, r *http.Request, status int, v any, err error) {
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	httpx.WriteJSON(w, status, v)
}

// queryInt reads a positive integer query parameter, def when absent or invalid. The console's
// pages use it; the REST API refuses bad parameters instead (see query).
func queryInt(r *http.Request, name string, def int) int {
	if v, err := strconv.Atoi(r.URL.Query().Get(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func (s *Server) listCommandTSQ(w http.ResponseWriter, r *http.Request) {
	q := parseQuery(r, "domain", "type", "tenant", "batch", "cursor", "limit")
	params := &driver.CommandListParams{Statuses: []driver.CommandStatus{driver.CommandStatusInTSQ},
		Domain: q.text("domain"), Type: q.text("type"), TenantID: q.text("tenant"),
		BatchID: q.uuid("batch"), BeforeID: q.cursor(), Limit: q.limit(defaultListLimit, maxListLimit)}
	if err := q.err(); err != nil {
		s.writeError(w, r, err)
		return
	}
	limit := params.Limit
	params.Limit++ // one more tells whether there is a next page
	rows, err := s.cfg.Client.ListCommands(r.Context(), params)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, pageOf(rows, limit, func(c *commandbus.CommandRow) string { return uuidKey(c.ID) }))
}

// unknownAction answers an action a queue does not have.
func unknownAction(w http.ResponseWriter, r *http.Request, actions []string) {
	httpx.WriteProblem(w, http.StatusNotFound, "NOT_FOUND", "No such action.",
		fmt.Sprintf("%s is not an action here; use %v.", input.Quote(r.PathValue("action")), actions))
}

func (s *Server) actOnCommand(w http.ResponseWriter, r *http.Request) {
	action := r.PathValue("action")
	if !slices.Contains(commandTSQActions, action) {
		unknownAction(w, r, commandTSQActions)
		return
	}
	id, err := pathID(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var req commandCompleteRequest
	if action == "complete" {
		err = decodeBody(w, r, &req)
	} else {
		var plain commandActionRequest
		err = decodeBody(w, r, &plain)
		req.Reason = plain.Reason
	}
	if err == nil {
		err = checkJSONText("result", req.Result)
	}
	op := commandbus.OperatorAction{Actor: httpx.Subject(r), Reason: req.Reason}
	if err = errors.Join(err, op.Validate()); err != nil {
		s.writeError(w, r, err)
		return
	}
	tsq := s.cfg.Client.TSQ()
	var row *commandbus.CommandRow
	switch action {
	case "retry":
		row, err = tsq.Retry(r.Context(), id, op)
	case "cancel":
		row, err = tsq.Cancel(r.Context(), id, op)
	case "complete":
		row, err = tsq.Complete(r.Context(), id, req.Result, op)
	}
	s.reply(w, r, http.StatusOK, row, notFoundAs(err, "command", id))
}

func (s *Server) listProcessTSQ(w http.ResponseWriter, r *http.Request) {
	q := parseQuery(r, "domain", "type", "cursor", "limit")
	params := &driver.ExecutionListParams{
		Statuses: []driver.ExecutionStatus{driver.ExecutionWaitingForTSQ},
		Domain:   q.text("domain"), Type: q.text("type"), BeforeID: q.cursor(), Limit: q.limit(defaultListLimit, maxListLimit),
	}
	if err := q.err(); err != nil {
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

// operationsFor returns the runtime's operations on an execution's (model, type), or nil.
func (s *Server) operationsFor(row *driver.ExecutionRow) process.Operations {
	if s.cfg.Runtime == nil {
		return nil
	}
	return s.cfg.Runtime.OperationsFor(row)
}

// operations finds an execution and the operations of its (model, type).
func (s *Server) operations(ctx context.Context, id uuid.UUID) (*driver.ExecutionRow, process.Operations, error) {
	row, err := s.cfg.Client.Driver().Executor().ExecutionGet(ctx, id)
	if err != nil {
		return nil, nil, notFoundAs(err, "execution", id)
	}
	ops := s.operationsFor(row)
	if ops == nil {
		return nil, nil, &commandbus.ValidationError{Field: "id", Message: "this instance has no runtime for " + row.Model + " type " + row.Type}
	}
	return row, ops, nil
}

func (s *Server) actOnProcess(w http.ResponseWriter, r *http.Request) {
	action := r.PathValue("action")
	if !slices.Contains(processTSQActions, action) {
		unknownAction(w, r, processTSQActions)
		return
	}
	id, err := pathID(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var (
		retry    processRetryRequest
		cancel   processCancelRequest
		complete processCompleteRequest
		skip     processSkipRequest
		reason   string
	)
	switch action {
	case "retry":
		err = decodeBody(w, r, &retry)
		reason = retry.Reason
	case "cancel":
		err = decodeBody(w, r, &cancel)
		reason = cancel.Reason
	case "complete":
		err = decodeBody(w, r, &complete)
		reason = complete.Reason
	case "skip":
		err = decodeBody(w, r, &skip)
		reason = skip.Reason
		if err == nil {
			err = checkJSONText("result", skip.Result)
			if msg := input.Identifier.Check(skip.Step); msg != "" {
				err = errors.Join(err, &commandbus.ValidationError{Field: "step", Message: msg})
			} else if strings.TrimSpace(skip.Step) == "" {
				err = errors.Join(err, &commandbus.ValidationError{Field: "step", Message: "required: the step the execution is at"})
			}
		}
	}
	op := commandbus.OperatorAction{Actor: httpx.Subject(r), Reason: reason}
	if err = errors.Join(err, op.Validate()); err != nil {
		s.writeError(w, r, err)
		return
	}
	row, ops, err := s.operations(r.Context(), id)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	switch action {
	case "retry":
		err = ops.Retry(r.Context(), id, op)
	case "cancel":
		err = ops.CancelOverride(r.Context(), id, cancel.RunCompensations, op)
	case "complete":
		// The same rule as the console's: the extensions' completion rule for the type.
		if err = s.checkCompleteOverrides(row.Type, complete.StateOverrides); err == nil {
			err = ops.CompleteOverride(r.Context(), id, complete.StateOverrides, op)
		}
	case "skip":
		err = ops.Skip(r.Context(), id, skip.Step, skip.Result, op)
	}
	if err != nil {
		s.writeError(w, r, notFoundAs(err, "execution", id))
		return
	}
	s.writeInstance(w, r, ops, id)
}

// writeInstance answers with an execution, its log always a list.
func (s *Server) writeInstance(w http.ResponseWriter, r *http.Request, ops process.Operations, id uuid.UUID) {
	inst, err := ops.GetJSON(r.Context(), id)
	if err == nil && inst.Log == nil {
		inst.Log = []*driver.ExecutionLogEntry{}
	}
	s.reply(w, r, http.StatusOK, inst, notFoundAs(err, "execution", id))
}

func (s *Server) getCommand(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r)
	if err == nil {
		err = parseQuery(r).err()
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	row, err := s.cfg.Client.GetCommand(r.Context(), id)
	if err == nil && row.Audit == nil {
		row.Audit = []commandbus.AuditEntry{}
	}
	s.reply(w, r, http.StatusOK, row, notFoundAs(err, "command", id))
}

func (s *Server) getProcess(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r)
	if err == nil {
		err = parseQuery(r).err()
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	_, ops, err := s.operations(r.Context(), id)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeInstance(w, r, ops, id)
}

func (s *Server) queueDepths(w http.ResponseWriter, r *http.Request) {
	if err := parseQuery(r).err(); err != nil {
		s.writeError(w, r, err)
		return
	}
	depths, err := s.cfg.Client.QueueDepths(r.Context())
	if depths == nil {
		depths = []*commandbus.QueueDepth{}
	}
	s.reply(w, r, http.StatusOK, map[string]any{"queues": depths}, err)
}
