package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/examples/payments"
	"github.com/commandbus/commandbus/internal/dbtest"
	"github.com/commandbus/commandbus/internal/servertest"
	"github.com/commandbus/commandbus/schedule"
	. "github.com/commandbus/commandbus/server"
	"github.com/commandbus/commandbus/workflow"
)

// apiDoc is the server's own OpenAPI document, loaded and validated by kin-openapi, with a
// router to find the operation of a request.
type apiDoc struct {
	doc    *openapi3.T
	router routers.Router
}

// loadAPIDoc fetches /api/openapi.json from the server at base and checks it is a valid
// OpenAPI 3 document.
func loadAPIDoc(t *testing.T, base string) *apiDoc {
	t.Helper()
	resp, err := http.Get(base + "/api/openapi.json")
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	doc, err := openapi3.NewLoader().LoadFromData(data)
	require.NoError(t, err)
	require.NoError(t, doc.Validate(context.Background()), "the document is valid OpenAPI 3")
	router, err := gorillamux.NewRouter(doc)
	require.NoError(t, err)
	return &apiDoc{doc: doc, router: router}
}

// checkResponse validates an answer against the document: its status is documented for the
// operation, its content type and body match the documented response. It returns false when the
// document has no operation for the request (an unknown route).
func (d *apiDoc) checkResponse(t *testing.T, x *exchange) bool {
	t.Helper()
	route, params, err := d.router.FindRoute(x.req)
	if err != nil {
		return false
	}
	input := &openapi3filter.RequestValidationInput{Request: x.req, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}}
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: input, Status: x.resp.StatusCode, Header: x.resp.Header,
		Options: &openapi3filter.Options{IncludeResponseStatus: true}}
	out.SetBodyBytes(x.respBody)
	require.NoError(t, openapi3filter.ValidateResponse(context.Background(), out),
		"%s %s answered %d %s: %s", x.req.Method, x.req.URL, x.resp.StatusCode, x.resp.Header.Get("Content-Type"), x.respBody)
	return true
}

// checkRequest validates a request against the document.
func (d *apiDoc) checkRequest(t *testing.T, x *exchange) {
	t.Helper()
	req := x.req.Clone(context.Background())
	if x.reqBody != nil {
		req.Body = io.NopCloser(bytes.NewReader(x.reqBody))
	}
	route, params, err := d.router.FindRoute(req)
	require.NoError(t, err, "%s %s", req.Method, req.URL)
	require.NoError(t, openapi3filter.ValidateRequest(context.Background(), &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}}), "%s %s %s", req.Method, req.URL, x.reqBody)
}

// documentedOperation is one operation of the document.
type documentedOperation struct {
	method, path string
	op           *openapi3.Operation
}

func (d *apiDoc) operations() []documentedOperation {
	var out []documentedOperation
	for path, item := range d.doc.Paths.Map() {
		for method, op := range item.Operations() {
			out = append(out, documentedOperation{method: method, path: path, op: op})
		}
	}
	// Reads first, so they see the data the actions are about; then actions in a stable order.
	sort.Slice(out, func(i, j int) bool {
		if (out[i].method == http.MethodGet) != (out[j].method == http.MethodGet) {
			return out[i].method == http.MethodGet
		}
		return out[i].op.OperationID < out[j].op.OperationID
	})
	return out
}

// Every documented operation, sent with its documented example (body, query parameters) to the
// real server on both drivers: the request conforms to the document, and the answer (status,
// content type, body) is one the document describes. A new route without an example here, or a
// handler that drifts from its document, fails this test.
//
// The query parameters each handler takes are recorded as the requests go by and compared with
// the ones its operation documents, so a parameter the server takes but the document does not
// list (or the reverse) fails too.
func TestOpenAPIDocumentMatchesServer(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	taken := map[string][]string{} // "GET /api/payments": the parameters its handler takes
	stop := ObserveQueryParameters(func(r *http.Request, allowed []string) {
		mu.Lock()
		defer mu.Unlock()
		taken[r.Method+" "+r.URL.Path] = append(taken[r.Method+" "+r.URL.Path], allowed...)
	})
	t.Cleanup(stop)
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		f := setupConsole(t, drv)
		doc := loadAPIDoc(t, f.HTTP.URL)
		ctx := context.Background()

		// The items the operations act on, one per action.
		settled := f.Submit(servertest.DomesticPayment(payments.TypePaymentManager))
		f.WaitPayment(settled.PaymentID, "COMPLETED")
		batch, err := f.Platform.CreateBatch(ctx, 3, "", payments.TypePaymentManager, nil)
		require.NoError(t, err)
		_, retryCommand := f.ParkRiskCommand()
		_, cancelCommand := f.ParkRiskCommand()
		_, completeCommand := f.ParkRiskCommand()
		parked := map[string]uuid.UUID{}
		for _, action := range ExportProcessTSQActions {
			parked[action] = f.ParkManagerPayment().ExecutionID
			parked[action+"2"] = f.ParkManagerPayment().ExecutionID // for /api/executions/{id}/{action}
		}
		approve, reject := f.Submit(servertest.BigPayment()), f.Submit(servertest.BigPayment())
		approveID, rejectID := f.WaitApproval(approve.PaymentID).ID, f.WaitApproval(reject.PaymentID).ID
		pendingPayment := f.Submit(servertest.PendingL2Payment())
		var pendingID uuid.UUID
		servertest.Eventually(t, 30*time.Second, "a pending L2 confirmation", func() bool {
			list, err := f.Platform.ListPendingNetworkResponses(ctx, payments.ListParams{})
			require.NoError(t, err)
			for _, p := range list {
				if p.PaymentID == pendingPayment.PaymentID {
					pendingID = p.ID
				}
			}
			return pendingID != uuid.Nil
		})
		// Workflows waiting at the sign-off gate (to suspend and to signal), one suspended (to
		// resume), and two in the cooling-off sleep (to list and to cancel its timer).
		review := func(wantWait string) uuid.UUID {
			id, err := f.Review.Start(ctx, map[string]string{"subject": "loan-7"}, workflow.Immediate())
			require.NoError(t, err)
			if wantWait == "coolOff" {
				_, err = f.Review.Signal(ctx, id, "approved", map[string]string{"by": "ops:ada"}, "")
				require.NoError(t, err)
			}
			servertest.Eventually(t, 30*time.Second, "the review waits at "+wantWait, func() bool {
				row, err := f.Client.Driver().Executor().ExecutionGet(ctx, id)
				require.NoError(t, err)
				return row.Status == driver.ExecutionWaitingForAsync && row.CurrentWait == wantWait
			})
			return id
		}
		toSuspend, toSignal, toResume := review("approve"), review("approve"), review("approve")
		require.NoError(t, f.Review.Suspend(ctx, toResume, commandbus.OperatorAction{Actor: "ops:test", Reason: "to resume through the API"}))
		sleeping, timerToCancel := review("coolOff"), review("coolOff")
		pathIDs := map[string]uuid.UUID{
			"getExecution": settled.ExecutionID, "retryExecution": parked["retry2"], "cancelExecution": parked["cancel2"],
			"completeExecution": parked["complete2"], "skipExecution": parked["skip2"],
			"suspendExecution": toSuspend, "resumeExecution": toResume, "signalExecution": toSignal,
			"listExecutionTimers": sleeping, "cancelExecutionTimer": timerToCancel,
			"getCommand": retryCommand.ID, "getProcess": settled.ExecutionID, "getPayment": settled.PaymentID,
			"getPaymentStatus": settled.ExecutionID, "getBatch": batch.ID,
			"retryCommand": retryCommand.ID, "cancelCommand": cancelCommand.ID, "completeCommand": completeCommand.ID,
			"retryProcess": parked["retry"], "cancelProcess": parked["cancel"], "completeProcess": parked["complete"], "skipProcess": parked["skip"],
			"approveApproval": approveID, "rejectApproval": rejectID, "respondToNetworkResponse": pendingID,
		}

		// A schedule of the review workflow per schedule action.
		for _, id := range []string{"getSchedule", "updateSchedule", "deleteSchedule", "pauseSchedule", "resumeSchedule", "triggerSchedule"} {
			s, err := f.Sched.Create(ctx, schedule.Spec{Name: "doc-" + id, Model: workflow.Model, Type: "ReviewFlow", FixedRate: time.Hour}, commandbus.OperatorAction{Actor: "ops:test", Reason: "document test"})
			require.NoError(t, err)
			pathIDs[id] = s.ID
		}

		// The other path parameters: the review workflow's definition, its gate's signal and its
		// sleep's timer.
		pathValues := map[string]string{"model": workflow.Model, "type": "ReviewFlow", "name": "approved", "timer": "coolOff"}
		// Undelivered outbox messages: one to list, one to resend.
		failedOutbox := failOutboxMessages(t, f.Client.Driver().Executor(), 2)
		opPathValues := map[string]string{"resendOutbox": strconv.FormatInt(failedOutbox[0], 10)}

		seen := map[string]bool{}
		for _, o := range doc.operations() {
			id := o.op.OperationID
			require.NotEmpty(t, id, "%s %s has an operationId", o.method, o.path)
			require.False(t, seen[id], "operationId %s is unique", id)
			seen[id] = true
			t.Run(id, func(t *testing.T) {
				path := o.path
				for _, p := range o.op.Parameters {
					if p.Value.In != "path" {
						continue
					}
					value, named := pathValues[p.Value.Name]
					if v, ok := opPathValues[id]; ok {
						value, named = v, true
					}
					if !named {
						itemID, ok := pathIDs[id]
						require.True(t, ok, "the test has no item for %s; add one", id)
						value = itemID.String()
					}
					require.NotEmpty(t, value, "the test has no value for path parameter %s of %s", p.Value.Name, id)
					path = strings.ReplaceAll(path, "{"+p.Value.Name+"}", value)
				}
				query := url.Values{}
				for _, p := range o.op.Parameters {
					if p.Value.In == "query" && p.Value.Example != nil {
						query.Set(p.Value.Name, strings.Trim(string(mustJSON(t, p.Value.Example)), `"`))
					}
				}
				target := f.HTTP.URL + path
				if len(query) > 0 {
					target += "?" + query.Encode()
				}
				var body []byte
				if o.op.RequestBody != nil {
					example := o.op.RequestBody.Value.Content.Get("application/json").Example
					require.NotNil(t, example, "%s documents an example body", id)
					body = mustJSON(t, example)
				}
				x := send(t, o.method, target, body, bearer(operatorToken))
				documented := []string{}
				for _, p := range o.op.Parameters {
					if p.Value.In == "query" {
						documented = append(documented, p.Value.Name)
					}
				}
				mu.Lock()
				handled := slices.Compact(slices.Sorted(slices.Values(taken[o.method+" "+path])))
				mu.Unlock()
				slices.Sort(documented)
				require.Equal(t, documented, append([]string{}, handled...), "%s: the query parameters the document lists are the ones the handler takes", id)
				doc.checkRequest(t, x)
				require.True(t, doc.checkResponse(t, x))
				require.Less(t, x.resp.StatusCode, 300, "%s answered %d: %s", id, x.resp.StatusCode, x.respBody)
				var list struct {
					Items *[]any `json:"items"`
				}
				if json.Unmarshal(x.respBody, &list) == nil && list.Items != nil {
					require.NotEmpty(t, *list.Items, "%s lists something, so its items were checked against the document", id)
				}
			})
		}
		for _, id := range []string{"submitPayment", "createBatch", "getPaymentStatus", "respondToNetworkResponse", "completeProcess", "listQueueDepths",
			"listDefinitions", "startDefinition", "listExecutions", "signalExecution", "suspendExecution", "cancelExecutionTimer", "listExecutionTSQ", "receiveEvent",
			"listSchedules", "createSchedule", "updateSchedule", "deleteSchedule", "pauseSchedule", "resumeSchedule", "triggerSchedule", "listJobLeases"} {
			require.True(t, seen[id], "%s is documented", id)
		}

		// What the examples did is in the database, not only in the answers.
		a, err := f.Platform.GetApproval(ctx, approveID)
		require.NoError(t, err)
		require.Equal(t, payments.ApprovalApproved, a.Status)
		p, err := f.Platform.GetPendingNetworkResponse(ctx, pendingID)
		require.NoError(t, err)
		require.Equal(t, payments.AnswerAccept, p.Answer)
		completed, err := f.Client.Driver().Executor().ExecutionGet(ctx, parked["complete"])
		require.NoError(t, err)
		require.Equal(t, driver.ExecutionCompleted, completed.Status)
		for id, want := range map[uuid.UUID]driver.ExecutionStatus{parked["complete2"]: driver.ExecutionCompleted, toSuspend: driver.ExecutionSuspended} {
			row, err := f.Client.Driver().Executor().ExecutionGet(ctx, id)
			require.NoError(t, err)
			require.Equal(t, want, row.Status)
		}
		for what, id := range map[string]uuid.UUID{"the signalled gate": toSignal, "the resumed review": toResume, "the cancelled sleep": timerToCancel} {
			id := id
			servertest.Eventually(t, 30*time.Second, what+" moves on", func() bool {
				inst, err := f.Review.Get(ctx, id)
				require.NoError(t, err)
				for _, st := range inst.Steps {
					if what == "the cancelled sleep" && st.ID == "coolOff" {
						return st.Status == "COMPLETED"
					}
					if what != "the cancelled sleep" && st.ID == "approve" {
						return what == "the signalled gate" && st.Status == "COMPLETED" || what == "the resumed review" && inst.Status == driver.ExecutionWaitingForAsync
					}
				}
				return false
			})
		}
		started, err := f.Review.List(ctx, workflow.ListParams{BusinessKey: "application-42"})
		require.NoError(t, err)
		require.Len(t, started, 1, "the documented start created one review")
		list, err := f.Platform.ListPayments(ctx, payments.PaymentFilter{Limit: 1000})
		require.NoError(t, err)
		require.True(t, slices.ContainsFunc(list, func(v *payments.PaymentView) bool { return v.IdempotencyKey == "invoice-2026-0001" }),
			"the documented payment was recorded")
	})
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	data, err := json.Marshal(v)
	require.NoError(t, err)
	return data
}
