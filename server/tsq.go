package server

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/google/uuid"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/process"
)

// actionRequest is the body of a troubleshooting-queue action.
type actionRequest struct {
	Reason           string          `json:"reason"`
	Result           json.RawMessage `json:"result,omitempty"`
	RunCompensations bool            `json:"runCompensations,omitempty"`
	StateOverrides   map[string]any  `json:"stateOverrides,omitempty"`
	Step             string          `json:"step,omitempty"`
}

func pathID(r *http.Request) (uuid.UUID, error) {
	id, err := uuid.Parse(r.PathValue("id"))
	if err != nil {
		return uuid.Nil, &commandbus.ValidationError{Field: "id", Message: "not a UUID"}
	}
	return id, nil
}

// reply writes v as JSON with status, or err as a problem.
func (s *Server) reply(w http.ResponseWriter, r *http.Request, status int, v any, err error) {
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, status, v)
}

func queryInt(r *http.Request, name string, def int) int {
	if v, err := strconv.Atoi(r.URL.Query().Get(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func (s *Server) listCommandTSQ(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	filter := commandbus.TSQFilter{Domain: q.Get("domain"), Type: q.Get("type"), TenantID: q.Get("tenant"), Limit: queryInt(r, "limit", 100)}
	if b := q.Get("batch"); b != "" {
		id, err := uuid.Parse(b)
		if err != nil {
			s.writeError(w, r, &commandbus.ValidationError{Field: "batch", Message: "not a UUID"})
			return
		}
		filter.BatchID = id
	}
	rows, err := s.cfg.Client.TSQ().List(r.Context(), filter)
	s.reply(w, r, http.StatusOK, items(rows), err)
}

func (s *Server) actOnCommand(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var req actionRequest
	if err := decodeBody(r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	op := commandbus.OperatorAction{Actor: subject(r), Reason: req.Reason}
	tsq := s.cfg.Client.TSQ()
	var row *commandbus.CommandRow
	switch r.PathValue("action") {
	case "retry":
		row, err = tsq.Retry(r.Context(), id, op)
	case "cancel":
		row, err = tsq.Cancel(r.Context(), id, op)
	case "complete":
		row, err = tsq.Complete(r.Context(), id, req.Result, op)
	default:
		writeProblem(w, http.StatusNotFound, "NOT_FOUND", "Unknown action; use retry, cancel or complete.", "")
		return
	}
	s.reply(w, r, http.StatusOK, row, err)
}

func (s *Server) listProcessTSQ(w http.ResponseWriter, r *http.Request) {
	rows, err := s.cfg.Client.Driver().Executor().ExecutionList(r.Context(), &driver.ExecutionListParams{
		Statuses: []driver.ExecutionStatus{driver.ExecutionWaitingForTSQ},
		Domain:   r.URL.Query().Get("domain"), Type: r.URL.Query().Get("type"), Limit: queryInt(r, "limit", 100),
	})
	s.reply(w, r, http.StatusOK, items(rows), err)
}

// operations finds the manager of an execution's process type.
func (s *Server) operations(r *http.Request, id uuid.UUID) (process.Operations, error) {
	row, err := s.cfg.Client.Driver().Executor().ExecutionGet(r.Context(), id)
	if err != nil {
		return nil, err
	}
	ops := process.ManagerFor(s.cfg.Client, row.Type)
	if ops == nil {
		return nil, &commandbus.ValidationError{Field: "id", Message: "this instance has no manager for process type " + row.Type}
	}
	return ops, nil
}

func (s *Server) actOnProcess(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var req actionRequest
	if err := decodeBody(r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	ops, err := s.operations(r, id)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	op := commandbus.OperatorAction{Actor: subject(r), Reason: req.Reason}
	switch r.PathValue("action") {
	case "retry":
		err = ops.Retry(r.Context(), id, op)
	case "cancel":
		err = ops.CancelOverride(r.Context(), id, req.RunCompensations, op)
	case "complete":
		err = ops.CompleteOverride(r.Context(), id, req.StateOverrides, op)
	case "skip":
		err = ops.Skip(r.Context(), id, req.Step, req.Result, op)
	default:
		writeProblem(w, http.StatusNotFound, "NOT_FOUND", "Unknown action; use retry, cancel, complete or skip.", "")
		return
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	inst, err := ops.GetJSON(r.Context(), id)
	s.reply(w, r, http.StatusOK, inst, err)
}

func (s *Server) getCommand(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	row, err := s.cfg.Client.GetCommand(r.Context(), id)
	s.reply(w, r, http.StatusOK, row, err)
}

func (s *Server) getProcess(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	ops, err := s.operations(r, id)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	inst, err := ops.GetJSON(r.Context(), id)
	s.reply(w, r, http.StatusOK, inst, err)
}

func (s *Server) queueDepths(w http.ResponseWriter, r *http.Request) {
	depths, err := s.cfg.Client.QueueDepths(r.Context())
	s.reply(w, r, http.StatusOK, map[string]any{"queues": depths}, err)
}
