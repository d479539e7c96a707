package server

import (
	"errors"
	"net/http"
	"slices"

	"github.com/google/uuid"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/examples/payments"
	"github.com/commandbus/commandbus/internal/input"
)

// PaymentsAPI serves the reference payments platform's REST routes.
type PaymentsAPI struct {
	Platform *payments.Platform
	s        *Server
}

// Routes registers the payment routes.
func (a *PaymentsAPI) Routes(mux *http.ServeMux, viewer, operator func(http.HandlerFunc) http.HandlerFunc) {
	mux.HandleFunc("POST /api/payments", operator(a.submitPayment))
	mux.HandleFunc("GET /api/payments", viewer(a.listPayments))
	mux.HandleFunc("GET /api/payments/{id}", viewer(a.getPayment))
	mux.HandleFunc("GET /api/payments/{processId}/status", viewer(a.getPaymentStatus))
	mux.HandleFunc("POST /api/batches", operator(a.createBatch))
	mux.HandleFunc("GET /api/batches", viewer(a.listBatches))
	mux.HandleFunc("GET /api/batches/{id}", viewer(a.getBatch))
	mux.HandleFunc("GET /api/approvals", viewer(a.listApprovals))
	mux.HandleFunc("POST /api/approvals/{id}/{decision}", operator(a.decideApproval))
	mux.HandleFunc("GET /api/network/pending", viewer(a.listPendingNetwork))
	mux.HandleFunc("POST /api/network/pending/{id}/respond", operator(a.respondNetwork))
}

// maxBatchListLimit is the most batches one listing returns (each is counted when read).
const maxBatchListLimit = 200

// reply writes v as JSON with status, or err as a problem.
func (a *PaymentsAPI) reply(w http.ResponseWriter, r *http.Request, status int, v any, err error) {
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	writeJSON(w, status, v)
}

func (a *PaymentsAPI) writeError(w http.ResponseWriter, r *http.Request, err error) {
	var dup *payments.DuplicatePaymentError
	if errors.As(err, &dup) {
		writeProblemDoc(w, Problem{Status: http.StatusConflict, Code: "DUPLICATE_IDEMPOTENCY_KEY",
			Title: "A payment with this idempotency key exists; nothing new was created.", Detail: err.Error(), ExistingID: dup.ExistingID.String()})
		return
	}
	a.s.writeError(w, r, err)
}

// noQuery refuses query parameters on a route that takes none.
func noQuery(r *http.Request) error { return parseQuery(r).err() }

func (a *PaymentsAPI) submitPayment(w http.ResponseWriter, r *http.Request) {
	var req payments.PaymentRequest
	err := decodeBody(w, r, &req)
	if err == nil {
		err = noQuery(r)
	}
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	res, err := a.Platform.SubmitPayment(r.Context(), req)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	status := http.StatusAccepted
	if res.Completed {
		status = http.StatusOK
	}
	writeJSON(w, status, res)
}

func (a *PaymentsAPI) getPayment(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r)
	if err == nil {
		err = noQuery(r)
	}
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	view, err := a.Platform.GetPayment(r.Context(), id)
	a.reply(w, r, http.StatusOK, view, err)
}

// getPaymentStatus answers the short status of a payment's process, addressed by the process
// (execution) id that submitting the payment returned.
func (a *PaymentsAPI) getPaymentStatus(w http.ResponseWriter, r *http.Request) {
	id, err := uuid.Parse(r.PathValue("processId"))
	if err != nil {
		err = &commandbus.ValidationError{Field: "processId", Message: "must be a UUID, got " + input.Quote(r.PathValue("processId"))}
	} else {
		err = noQuery(r)
	}
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	status, err := a.Platform.GetPaymentStatus(r.Context(), id)
	a.reply(w, r, http.StatusOK, status, err)
}

func (a *PaymentsAPI) listPayments(w http.ResponseWriter, r *http.Request) {
	q := parseQuery(r, "status", "processType", "batch", "limit")
	filter := payments.PaymentFilter{Status: q.oneOf("status", payments.PaymentStatuses()), ProcessType: q.oneOf("processType", payments.ProcessTypes),
		BatchID: q.uuid("batch"), Limit: q.limit(50, maxListLimit)}
	if err := q.err(); err != nil {
		a.writeError(w, r, err)
		return
	}
	list, err := a.Platform.ListPayments(r.Context(), filter)
	a.reply(w, r, http.StatusOK, items(list), err)
}

// batchRequest is the body of POST /api/batches.
type batchRequest struct {
	Count int `json:"count"`
	// Day is the value date of the batch's payments, YYYY-MM-DD; default today.
	Day string `json:"day,omitempty"`
	// ProcessType is PaymentStep (default) or PaymentManager.
	ProcessType string `json:"processType,omitempty"`
	// Behavior, or the name of a preset, shapes the simulators for the batch; default happy.
	Behavior       *payments.Behavior `json:"behavior,omitempty"`
	BehaviorPreset string             `json:"behaviorPreset,omitempty"`
}

func (a *PaymentsAPI) createBatch(w http.ResponseWriter, r *http.Request) {
	var req batchRequest
	err := decodeBody(w, r, &req)
	if err == nil {
		err = noQuery(r)
	}
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	behavior := req.Behavior
	if req.BehaviorPreset != "" {
		if behavior != nil {
			a.writeError(w, r, &commandbus.ValidationError{Field: "behaviorPreset", Message: "give a behavior or a preset, not both"})
			return
		}
		preset, err := payments.Preset(req.BehaviorPreset)
		if err != nil {
			a.writeError(w, r, &commandbus.ValidationError{Field: "behaviorPreset", Message: "unknown preset " + input.Quote(req.BehaviorPreset) + " (happy, realistic, chaos)"})
			return
		}
		behavior = preset
	}
	batch, err := a.Platform.CreateBatch(r.Context(), req.Count, req.Day, req.ProcessType, behavior)
	a.reply(w, r, http.StatusCreated, batch, err)
}

func (a *PaymentsAPI) getBatch(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r)
	if err == nil {
		err = noQuery(r)
	}
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	batch, err := a.Platform.GetBatch(r.Context(), id)
	a.reply(w, r, http.StatusOK, batch, err)
}

func (a *PaymentsAPI) listBatches(w http.ResponseWriter, r *http.Request) {
	q := parseQuery(r, "limit")
	limit := q.limit(50, maxBatchListLimit)
	if err := q.err(); err != nil {
		a.writeError(w, r, err)
		return
	}
	list, err := a.Platform.ListBatches(r.Context(), limit)
	a.reply(w, r, http.StatusOK, items(list), err)
}

func (a *PaymentsAPI) listApprovals(w http.ResponseWriter, r *http.Request) {
	q := parseQuery(r, "status", "limit")
	status, limit := q.oneOf("status", payments.ApprovalStatuses), q.limit(defaultListLimit, maxListLimit)
	if err := q.err(); err != nil {
		a.writeError(w, r, err)
		return
	}
	list, err := a.Platform.ListApprovals(r.Context(), status, limit)
	a.reply(w, r, http.StatusOK, items(list), err)
}

// decisionRequest is the body of an approval decision.
type decisionRequest struct {
	Reason string `json:"reason"`
}

// approvalDecisions are the decisions on a pending approval.
var approvalDecisions = []string{"approve", "reject"}

func (a *PaymentsAPI) decideApproval(w http.ResponseWriter, r *http.Request) {
	decision := r.PathValue("decision")
	if !slices.Contains(approvalDecisions, decision) {
		unknownAction(w, r, approvalDecisions)
		return
	}
	id, err := pathID(r)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	var req decisionRequest
	err = decodeBody(w, r, &req)
	if err == nil {
		err = noQuery(r)
	}
	if err = errors.Join(err, commandbus.OperatorAction{Actor: subject(r), Reason: req.Reason}.Validate()); err != nil {
		a.writeError(w, r, err)
		return
	}
	if decision == "approve" {
		err = a.Platform.Approve(r.Context(), id, subject(r), req.Reason)
	} else {
		err = a.Platform.Reject(r.Context(), id, subject(r), req.Reason)
	}
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	approval, err := a.Platform.GetApproval(r.Context(), id)
	a.reply(w, r, http.StatusOK, approval, err)
}

func (a *PaymentsAPI) listPendingNetwork(w http.ResponseWriter, r *http.Request) {
	q := parseQuery(r, "limit")
	limit := q.limit(defaultListLimit, maxListLimit)
	if err := q.err(); err != nil {
		a.writeError(w, r, err)
		return
	}
	list, err := a.Platform.ListPendingNetworkResponses(r.Context(), limit)
	a.reply(w, r, http.StatusOK, items(list), err)
}

// respondRequest is the body of an operator's answer to a pending network confirmation.
type respondRequest struct {
	// Answer is ACCEPT (the level is confirmed) or REJECT (the payment fails and compensates).
	Answer string `json:"answer,omitempty"`
	// Success is the older form of Answer: true for ACCEPT, false for REJECT. Give one of them.
	Success *bool  `json:"success,omitempty"`
	Reason  string `json:"reason"`
}

// answer is the request's answer, from Answer or Success.
func (req respondRequest) answer() (string, error) {
	if req.Success == nil {
		if req.Answer == "" {
			return "", &commandbus.ValidationError{Field: "answer", Message: "required: ACCEPT or REJECT"}
		}
		return req.Answer, nil
	}
	fromSuccess := payments.AnswerReject
	if *req.Success {
		fromSuccess = payments.AnswerAccept
	}
	if req.Answer != "" && req.Answer != fromSuccess {
		return "", &commandbus.ValidationError{Field: "success", Message: "contradicts answer; give one of them"}
	}
	return fromSuccess, nil
}

func (a *PaymentsAPI) respondNetwork(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	var req respondRequest
	err = decodeBody(w, r, &req)
	if err == nil {
		err = noQuery(r)
	}
	answer := ""
	if err == nil {
		answer, err = req.answer()
	}
	if err = errors.Join(err, commandbus.OperatorAction{Actor: subject(r), Reason: req.Reason}.Validate()); err != nil {
		a.writeError(w, r, err)
		return
	}
	if err := a.Platform.RespondNetwork(r.Context(), id, answer, subject(r), req.Reason); err != nil {
		a.writeError(w, r, err)
		return
	}
	pending, err := a.Platform.GetPendingNetworkResponse(r.Context(), id)
	a.reply(w, r, http.StatusOK, pending, err)
}
