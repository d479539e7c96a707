package server

import (
	"errors"
	"net/http"

	"github.com/google/uuid"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/examples/payments"
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
	mux.HandleFunc("POST /api/batches", operator(a.createBatch))
	mux.HandleFunc("GET /api/batches", viewer(a.listBatches))
	mux.HandleFunc("GET /api/batches/{id}", viewer(a.getBatch))
	mux.HandleFunc("GET /api/approvals", viewer(a.listApprovals))
	mux.HandleFunc("POST /api/approvals/{id}/{decision}", operator(a.decideApproval))
	mux.HandleFunc("GET /api/network/pending", viewer(a.listPendingNetwork))
	mux.HandleFunc("POST /api/network/pending/{id}/respond", operator(a.respondNetwork))
}

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

func (a *PaymentsAPI) submitPayment(w http.ResponseWriter, r *http.Request) {
	var req payments.PaymentRequest
	if err := decodeBody(r, &req); err != nil {
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
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	view, err := a.Platform.GetPayment(r.Context(), id)
	a.reply(w, r, http.StatusOK, view, err)
}

func (a *PaymentsAPI) listPayments(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	filter := payments.PaymentFilter{Status: q.Get("status"), ProcessType: q.Get("processType"), Limit: queryInt(r, "limit", 50)}
	if b := q.Get("batch"); b != "" {
		id, err := uuid.Parse(b)
		if err != nil {
			a.writeError(w, r, &commandbus.ValidationError{Field: "batch", Message: "not a UUID"})
			return
		}
		filter.BatchID = id
	}
	list, err := a.Platform.ListPayments(r.Context(), filter)
	a.reply(w, r, http.StatusOK, items(list), err)
}

// batchRequest is the body of POST /api/batches.
type batchRequest struct {
	Count          int                `json:"count"`
	Day            string             `json:"day"`
	ProcessType    string             `json:"processType"`
	Behavior       *payments.Behavior `json:"behavior,omitempty"`
	BehaviorPreset string             `json:"behaviorPreset,omitempty"`
}

func (a *PaymentsAPI) createBatch(w http.ResponseWriter, r *http.Request) {
	var req batchRequest
	if err := decodeBody(r, &req); err != nil {
		a.writeError(w, r, err)
		return
	}
	behavior := req.Behavior
	if behavior == nil && req.BehaviorPreset != "" {
		preset, err := payments.Preset(req.BehaviorPreset)
		if err != nil {
			a.writeError(w, r, &commandbus.ValidationError{Field: "behaviorPreset", Message: err.Error()})
			return
		}
		behavior = preset
	}
	batch, err := a.Platform.CreateBatch(r.Context(), req.Count, req.Day, req.ProcessType, behavior)
	a.reply(w, r, http.StatusCreated, batch, err)
}

func (a *PaymentsAPI) getBatch(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	batch, err := a.Platform.GetBatch(r.Context(), id)
	a.reply(w, r, http.StatusOK, batch, err)
}

func (a *PaymentsAPI) listBatches(w http.ResponseWriter, r *http.Request) {
	list, err := a.Platform.ListBatches(r.Context(), queryInt(r, "limit", 50))
	a.reply(w, r, http.StatusOK, items(list), err)
}

func (a *PaymentsAPI) listApprovals(w http.ResponseWriter, r *http.Request) {
	list, err := a.Platform.ListApprovals(r.Context(), r.URL.Query().Get("status"), queryInt(r, "limit", 100))
	a.reply(w, r, http.StatusOK, items(list), err)
}

// reasonRequest is the body of an approval decision or a network answer.
type reasonRequest struct {
	Reason       string `json:"reason"`
	Success      *bool  `json:"success,omitempty"`
	Answer       string `json:"answer,omitempty"`
	ErrorCode    string `json:"errorCode,omitempty"`
	ErrorMessage string `json:"errorMessage,omitempty"`
}

func (a *PaymentsAPI) decideApproval(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	var req reasonRequest
	if err := decodeBody(r, &req); err != nil {
		a.writeError(w, r, err)
		return
	}
	switch r.PathValue("decision") {
	case "approve":
		err = a.Platform.Approve(r.Context(), id, subject(r), req.Reason)
	case "reject":
		err = a.Platform.Reject(r.Context(), id, subject(r), req.Reason)
	default:
		writeProblem(w, http.StatusNotFound, "NOT_FOUND", "Unknown decision; use approve or reject.", "")
		return
	}
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	approval, err := a.Platform.GetApproval(r.Context(), id)
	a.reply(w, r, http.StatusOK, approval, err)
}

func (a *PaymentsAPI) listPendingNetwork(w http.ResponseWriter, r *http.Request) {
	list, err := a.Platform.ListPendingNetworkResponses(r.Context(), queryInt(r, "limit", 100))
	a.reply(w, r, http.StatusOK, items(list), err)
}

func (a *PaymentsAPI) respondNetwork(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	var req reasonRequest
	if err := decodeBody(r, &req); err != nil {
		a.writeError(w, r, err)
		return
	}
	answer := req.Answer
	if answer == "" && req.Success != nil {
		answer = payments.AnswerReject
		if *req.Success {
			answer = payments.AnswerAccept
		}
	}
	if err := a.Platform.RespondNetwork(r.Context(), id, answer, subject(r), req.Reason); err != nil {
		a.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": id, "answer": answer, "by": subject(r)})
}
