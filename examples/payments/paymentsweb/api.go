package paymentsweb

import (
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/examples/payments"
	"github.com/commandbus/commandbus/internal/input"
	"github.com/commandbus/commandbus/server"
)

// maxBatchListLimit is the most batches one page returns (each is counted when read).
const maxBatchListLimit = 200

// defaultPaymentListLimit is the payments and batches a page returns when the limit is not given.
const defaultPaymentListLimit = 50

// The lists are paged by keyset with the server's cursors: a cursor's key names the last row of
// the previous page by the list's order, its time (Unix microseconds) and its id.

// timeKey is the cursor key of a row listed by time and id.
func timeKey(at time.Time, id uuid.UUID) string {
	return strconv.FormatInt(at.UnixMicro(), 10) + "/" + id.String()
}

// parseTimeKey reads a key made by timeKey.
func parseTimeKey(key string) (*payments.PageCursor, bool) {
	at, id, ok := strings.Cut(key, "/")
	micros, err := strconv.ParseInt(at, 10, 64)
	rowID, idErr := uuid.Parse(id)
	if !ok || err != nil || idErr != nil {
		return nil, false
	}
	return &payments.PageCursor{At: time.UnixMicro(micros).UTC(), ID: rowID}, true
}

// pageCursor reads the cursor parameter of a list ordered by time and id (nil when absent; a key
// of another list is a problem naming cursor).
func pageCursor(q *server.Query) *payments.PageCursor {
	key := q.Cursor()
	if key == "" {
		return nil
	}
	cursor, ok := parseTimeKey(key)
	if !ok {
		q.BadCursor()
	}
	return cursor
}

// paymentKey is the cursor key of a listed payment: its creation time and id, and its process id,
// which orders the lists filtered by a process status ("" before the payment has a process).
func paymentKey(v *payments.PaymentView) string {
	key := timeKey(v.CreatedAt, v.ID) + "/"
	if v.ExecutionID != uuid.Nil {
		key += v.ExecutionID.String()
	}
	return key
}

// parsePaymentKey reads a key made by paymentKey.
func parsePaymentKey(key string) (*payments.PaymentCursor, bool) {
	i := strings.LastIndexByte(key, '/')
	at, ok := parseTimeKey(key[:max(i, 0)])
	var execID uuid.UUID
	var err error
	if rest := key[i+1:]; ok && rest != "" {
		execID, err = uuid.Parse(rest)
	}
	if !ok || err != nil {
		return nil, false
	}
	return &payments.PaymentCursor{CreatedAt: at.At, ID: at.ID, ExecutionID: execID}, true
}

// paymentCursor reads the cursor parameter of the payments list (nil when absent).
func paymentCursor(q *server.Query) *payments.PaymentCursor {
	key := q.Cursor()
	if key == "" {
		return nil
	}
	cursor, ok := parsePaymentKey(key)
	if !ok {
		q.BadCursor()
	}
	return cursor
}

// reply writes v as JSON with status, or err as a problem.
func (c *Extension) reply(w http.ResponseWriter, r *http.Request, status int, v any, err error) {
	if err != nil {
		c.writeError(w, r, err)
		return
	}
	server.WriteJSON(w, status, v)
}

// noQuery refuses query parameters on a route that takes none.
func noQuery(r *http.Request) error { return server.ParseQuery(r).Err() }

// IdempotencyKeyHeader is the IETF header that may carry a submission's idempotency key instead
// of the body's idempotencyKey.
const IdempotencyKeyHeader = "Idempotency-Key"

// ReplayedHeader marks an answer replayed for a repeat of a request.
const ReplayedHeader = "Idempotent-Replayed"

// headerIdempotencyKey reads the Idempotency-Key header: a structured-field string ("key", as the
// IETF draft writes it) or the bare key.
func headerIdempotencyKey(r *http.Request) (string, error) {
	values := r.Header.Values(IdempotencyKeyHeader)
	switch {
	case len(values) == 0:
		return "", nil
	case len(values) > 1:
		return "", &commandbus.ValidationError{Field: IdempotencyKeyHeader, Message: "is given more than once"}
	}
	key := strings.TrimSpace(values[0])
	if len(key) >= 2 && key[0] == '"' && key[len(key)-1] == '"' {
		key = key[1 : len(key)-1]
	}
	if key == "" {
		return "", &commandbus.ValidationError{Field: IdempotencyKeyHeader, Message: "is empty"}
	}
	return key, nil
}

// submitPayment submits a payment. Its idempotency key comes in the body or the Idempotency-Key
// header. A repeat of a request with its key and the same body replays the first answer; with
// another body it is a 409 naming the fields that differ.
func (c *Extension) submitPayment(w http.ResponseWriter, r *http.Request) {
	var req payments.PaymentRequest
	err := server.DecodeBody(w, r, &req)
	if err == nil {
		err = noQuery(r)
	}
	if err == nil {
		var key string
		key, err = headerIdempotencyKey(r)
		switch {
		case err != nil, key == "":
		case req.IdempotencyKey == "":
			req.IdempotencyKey = key
		case req.IdempotencyKey != key:
			err = &commandbus.ValidationError{Field: IdempotencyKeyHeader, Message: "differs from the body's idempotencyKey; give the key once, or the same in both"}
		}
	}
	if err != nil {
		c.writeError(w, r, err)
		return
	}
	res, err := c.platform.SubmitPayment(r.Context(), req)
	var dup *payments.DuplicatePaymentError
	if errors.As(err, &dup) && dup.SameRequest {
		c.replay(w, r, dup)
		return
	}
	if err != nil {
		c.writeError(w, r, err)
		return
	}
	status := http.StatusAccepted
	if res.Completed {
		status = http.StatusOK
	}
	body, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		c.writeError(w, r, err)
		return
	}
	body = append(body, '\n')
	if err := c.platform.RecordSubmitResponse(r.Context(), res.PaymentID, status, body); err != nil {
		// The payment exists; a repeat answers from its current state instead of this answer.
		c.m.Logger().Warn("recording a submission's answer failed", "payment_id", res.PaymentID, "request_id", server.RequestID(r), "error", err)
	}
	writeRaw(w, status, body)
}

// replay answers a repeat of a submission: the first answer when it was recorded, else (the
// first request has not answered yet, or its answer was lost) 202 with the payment as it is now.
func (c *Extension) replay(w http.ResponseWriter, r *http.Request, dup *payments.DuplicatePaymentError) {
	w.Header().Set(ReplayedHeader, "true")
	if dup.Response != nil {
		writeRaw(w, dup.Response.Status, dup.Response.Body)
		return
	}
	server.WriteJSON(w, http.StatusAccepted, &payments.PaymentResult{PaymentID: dup.ExistingID, ExecutionID: dup.ExecutionID,
		Status: dup.Status, Message: "Accepted earlier with this idempotency key"})
}

// writeRaw writes a JSON body as it is.
func writeRaw(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

func (c *Extension) getPayment(w http.ResponseWriter, r *http.Request) {
	id, err := server.PathID(r)
	if err == nil {
		err = noQuery(r)
	}
	if err != nil {
		c.writeError(w, r, err)
		return
	}
	view, err := c.platform.GetPayment(r.Context(), id)
	c.reply(w, r, http.StatusOK, view, err)
}

// getPaymentStatus answers the short status of a payment's process, addressed by the process
// (execution) id that submitting the payment returned.
func (c *Extension) getPaymentStatus(w http.ResponseWriter, r *http.Request) {
	id, err := uuid.Parse(r.PathValue("processId"))
	if err != nil {
		err = &commandbus.ValidationError{Field: "processId", Message: "must be a UUID, got " + input.Quote(r.PathValue("processId"))}
	} else {
		err = noQuery(r)
	}
	if err != nil {
		c.writeError(w, r, err)
		return
	}
	status, err := c.platform.GetPaymentStatus(r.Context(), id)
	c.reply(w, r, http.StatusOK, status, err)
}

func (c *Extension) listPayments(w http.ResponseWriter, r *http.Request) {
	q := server.ParseQuery(r, "status", "processType", "batch", "cursor", "limit")
	filter := payments.PaymentFilter{Status: q.OneOf("status", payments.PaymentStatuses()), ProcessType: q.OneOf("processType", payments.ProcessTypes),
		BatchID: q.UUID("batch"), Limit: q.Limit(defaultPaymentListLimit, server.MaxListLimit), After: paymentCursor(q)}
	if err := q.Err(); err != nil {
		c.writeError(w, r, err)
		return
	}
	limit := filter.Limit
	filter.Limit++ // one more tells whether there is a next page
	list, err := c.platform.ListPayments(r.Context(), filter)
	c.reply(w, r, http.StatusOK, server.PageOf(list, limit, paymentKey), err)
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

func (c *Extension) createBatchAPI(w http.ResponseWriter, r *http.Request) {
	var req batchRequest
	err := server.DecodeBody(w, r, &req)
	if err == nil {
		err = noQuery(r)
	}
	if err != nil {
		c.writeError(w, r, err)
		return
	}
	behavior := req.Behavior
	if req.BehaviorPreset != "" {
		if behavior != nil {
			c.writeError(w, r, &commandbus.ValidationError{Field: "behaviorPreset", Message: "give a behavior or a preset, not both"})
			return
		}
		preset, err := payments.Preset(req.BehaviorPreset)
		if err != nil {
			c.writeError(w, r, &commandbus.ValidationError{Field: "behaviorPreset", Message: "unknown preset " + input.Quote(req.BehaviorPreset) + " (happy, realistic, chaos)"})
			return
		}
		behavior = preset
	}
	batch, err := c.platform.CreateBatch(r.Context(), req.Count, req.Day, req.ProcessType, behavior)
	c.reply(w, r, http.StatusCreated, batch, err)
}

func (c *Extension) getBatch(w http.ResponseWriter, r *http.Request) {
	id, err := server.PathID(r)
	if err == nil {
		err = noQuery(r)
	}
	if err != nil {
		c.writeError(w, r, err)
		return
	}
	batch, err := c.platform.GetBatch(r.Context(), id)
	c.reply(w, r, http.StatusOK, batch, err)
}

func (c *Extension) listBatches(w http.ResponseWriter, r *http.Request) {
	q := server.ParseQuery(r, "cursor", "limit")
	params := payments.ListParams{Limit: q.Limit(defaultPaymentListLimit, maxBatchListLimit), After: pageCursor(q)}
	if err := q.Err(); err != nil {
		c.writeError(w, r, err)
		return
	}
	limit := params.Limit
	params.Limit++
	list, err := c.platform.ListBatches(r.Context(), params)
	c.reply(w, r, http.StatusOK, server.PageOf(list, limit, func(b *payments.BatchView) string { return timeKey(b.CreatedAt, b.ID) }), err)
}

func (c *Extension) listApprovals(w http.ResponseWriter, r *http.Request) {
	q := server.ParseQuery(r, "status", "cursor", "limit")
	filter := payments.ApprovalFilter{Status: q.OneOf("status", payments.ApprovalStatuses),
		Limit: q.Limit(server.DefaultListLimit, server.MaxListLimit), After: pageCursor(q)}
	if err := q.Err(); err != nil {
		c.writeError(w, r, err)
		return
	}
	limit := filter.Limit
	filter.Limit++
	list, err := c.platform.ListApprovals(r.Context(), filter)
	c.reply(w, r, http.StatusOK, server.PageOf(list, limit, func(a *payments.Approval) string { return timeKey(a.RequestedAt, a.ID) }), err)
}

// decisionRequest is the body of an approval decision.
type decisionRequest struct {
	Reason string `json:"reason"`
}

// approvalDecisions are the decisions on a pending approval.
var approvalDecisions = []string{"approve", "reject"}

func (c *Extension) decideApproval(w http.ResponseWriter, r *http.Request) {
	decision := r.PathValue("decision")
	if !slices.Contains(approvalDecisions, decision) {
		unknownAction(w, r, approvalDecisions)
		return
	}
	id, err := server.PathID(r)
	if err != nil {
		c.writeError(w, r, err)
		return
	}
	var req decisionRequest
	err = server.DecodeBody(w, r, &req)
	if err == nil {
		err = noQuery(r)
	}
	if err = errors.Join(err, commandbus.OperatorAction{Actor: server.Subject(r), Reason: req.Reason}.Validate()); err != nil {
		c.writeError(w, r, err)
		return
	}
	if decision == "approve" {
		err = c.platform.Approve(r.Context(), id, server.Subject(r), req.Reason)
	} else {
		err = c.platform.Reject(r.Context(), id, server.Subject(r), req.Reason)
	}
	if err != nil {
		c.writeError(w, r, err)
		return
	}
	approval, err := c.platform.GetApproval(r.Context(), id)
	c.reply(w, r, http.StatusOK, approval, err)
}

func (c *Extension) listPendingNetwork(w http.ResponseWriter, r *http.Request) {
	q := server.ParseQuery(r, "cursor", "limit")
	params := payments.ListParams{Limit: q.Limit(server.DefaultListLimit, server.MaxListLimit), After: pageCursor(q)}
	if err := q.Err(); err != nil {
		c.writeError(w, r, err)
		return
	}
	limit := params.Limit
	params.Limit++
	list, err := c.platform.ListPendingNetworkResponses(r.Context(), params)
	c.reply(w, r, http.StatusOK, server.PageOf(list, limit, func(p *payments.PendingNetworkResponse) string { return timeKey(p.CreatedAt, p.ID) }), err)
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

func (c *Extension) respondNetwork(w http.ResponseWriter, r *http.Request) {
	id, err := server.PathID(r)
	if err != nil {
		c.writeError(w, r, err)
		return
	}
	var req respondRequest
	err = server.DecodeBody(w, r, &req)
	if err == nil {
		err = noQuery(r)
	}
	answer := ""
	if err == nil {
		answer, err = req.answer()
	}
	if err = errors.Join(err, commandbus.OperatorAction{Actor: server.Subject(r), Reason: req.Reason}.Validate()); err != nil {
		c.writeError(w, r, err)
		return
	}
	if err := c.platform.RespondNetwork(r.Context(), id, answer, server.Subject(r), req.Reason); err != nil {
		c.writeError(w, r, err)
		return
	}
	pending, err := c.platform.GetPendingNetworkResponse(r.Context(), id)
	c.reply(w, r, http.StatusOK, pending, err)
}
