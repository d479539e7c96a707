package console

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
)

// timelineStep is one step of an execution as an operator follows it: every log entry of the
// step (its attempts, the command it sent, the wait for the reply, the outcome), with timings.
// Compensations, responses, lifecycle changes and operator actions are steps of their own.
type timelineStep struct {
	Name        string
	Kind        string
	Status      string
	Started     time.Time
	Ended       *time.Time
	Duration    time.Duration
	Attempt     int
	MaxAttempts int
	// Timeout is a wait's timeout as the process set it; TimesOutAt is when the current wait
	// times out.
	Timeout    string
	TimesOutAt *time.Time
	Current    bool
	Error      string
	Entries    []*timelineEntry
}

type timelineEntry struct {
	Seq          int
	At           time.Time
	Type         string
	Status       string
	Attempt      int
	MaxAttempts  int
	Request      string
	Response     string
	ErrorCode    string
	ErrorMessage string
	Actor        string
	Reason       string
	Command      *commandSummary
}

// commandSummary is the command a command step sent, as the bus sees it: its deliveries and
// audit trail.
type commandSummary struct {
	ID          uuid.UUID
	Domain      string
	Type        string
	Status      string
	Attempt     int
	MaxAttempts int
	Error       string
	Audit       []driver.AuditEntry
}

// maxTimelineCommands bounds the command look-ups of one page.
const maxTimelineCommands = 50

// finishing says which entry statuses end a step.
var finishing = map[string]bool{
	"COMPLETED": true, "SATISFIED": true, "RECORDED": true, "COMPENSATION_SUCCESS": true,
	"COMPENSATION_FAILED": true, "FAILED": true, "REPLY_FAILED": true, "TIMED_OUT": true,
}

func (c *Console) buildTimeline(ctx context.Context, row *driver.ExecutionRow, log []*driver.ExecutionLogEntry) []*timelineStep {
	var steps []*timelineStep
	byKey := map[string]*timelineStep{}
	fetched := 0
	for _, e := range log {
		key, kind := "s:"+e.Name, ""
		switch e.EntryType {
		case "STEP":
			kind = "Step"
		case "COMMAND":
			kind = "Command step"
		case "WAIT":
			kind = "Wait"
		case "SIDE_EFFECT":
			kind = "Side effect"
		case "COMPENSATION":
			key, kind = "c:"+e.Name, "Compensation"
		case "ASYNC_RESPONSE":
			key, kind = "e:"+strconv.Itoa(e.Seq), "Response"
		case "LIFECYCLE":
			key, kind = "e:"+strconv.Itoa(e.Seq), "Lifecycle"
		default:
			key, kind = "e:"+strconv.Itoa(e.Seq), "Operator action"
		}
		st := byKey[key]
		if st == nil {
			st = &timelineStep{Name: e.Name, Kind: kind, Started: e.At}
			byKey[key] = st
			steps = append(steps, st)
		}
		// A command step logs COMMAND, WAIT and STEP entries under one name.
		if kind == "Command step" || (st.Kind == "Wait" && kind == "Step") {
			st.Kind = kind
		}
		entry := &timelineEntry{Seq: e.Seq, At: e.At, Type: e.EntryType, Status: e.StepStatus, Attempt: e.Attempt,
			MaxAttempts: e.MaxAttempts, Request: prettyJSON(e.Request), Response: prettyJSON(e.Response),
			ErrorCode: e.ErrorCode, ErrorMessage: e.ErrorMessage, Actor: e.Actor, Reason: e.Reason}
		if e.EntryType == "COMMAND" && fetched < maxTimelineCommands {
			fetched++
			entry.Command = c.commandOf(ctx, e.Request)
		}
		if e.EntryType == "WAIT" && e.StepStatus == "PENDING" {
			var w struct {
				Timeout string `json:"timeout"`
			}
			if json.Unmarshal(e.Response, &w) == nil && w.Timeout != "" {
				st.Timeout = w.Timeout
			}
		}
		if e.MaxAttempts > 0 {
			st.MaxAttempts = e.MaxAttempts
		}
		st.Attempt = max(st.Attempt, e.Attempt)
		st.Status = e.StepStatus
		if st.Status == "PENDING" {
			st.Status = "WAITING"
		}
		if e.ErrorCode != "" || e.ErrorMessage != "" {
			st.Error = e.ErrorCode + ": " + e.ErrorMessage
		}
		st.Ended = nil
		if finishing[e.StepStatus] || kind == "Response" || kind == "Lifecycle" || kind == "Operator action" {
			at := e.At
			st.Ended = &at
			st.Duration = at.Sub(st.Started)
		}
		st.Entries = append(st.Entries, entry)
	}
	for _, st := range steps {
		if st.Kind == "Response" || st.Kind == "Lifecycle" || st.Kind == "Operator action" || st.Kind == "Compensation" {
			continue
		}
		if row.Status.Terminal() {
			continue
		}
		// The step a process waits at, or stopped at for an operator (its last entry may say
		// TIMED_OUT or FAILED).
		stopped := row.Status == driver.ExecutionWaitingForTSQ && row.Step == st.Name
		if stopped || (st.Ended == nil && (row.CurrentWait == st.Name || row.Step == st.Name)) {
			st.Current = true
			if row.CurrentWait == st.Name && row.Status == driver.ExecutionWaitingForAsync {
				st.TimesOutAt = row.NextWaitTimeoutAt
			}
		}
	}
	return steps
}

// commandOf loads the command a COMMAND entry names.
func (c *Console) commandOf(ctx context.Context, request json.RawMessage) *commandSummary {
	var sent struct {
		CommandID uuid.UUID `json:"commandId"`
		Domain    string    `json:"domain"`
		Type      string    `json:"type"`
	}
	if json.Unmarshal(request, &sent) != nil || sent.CommandID == uuid.Nil {
		return nil
	}
	out := &commandSummary{ID: sent.CommandID, Domain: sent.Domain, Type: sent.Type}
	row, err := c.client.GetCommand(ctx, sent.CommandID)
	if err != nil {
		out.Status = "UNKNOWN"
		out.Error = err.Error()
		return out
	}
	out.Status, out.Attempt, out.MaxAttempts, out.Audit = string(row.Status), row.Attempt, row.MaxAttempts, row.Audit
	if row.ErrorCode != "" || row.ErrorMessage != "" {
		out.Error = fmt.Sprintf("%s: %s", row.ErrorCode, row.ErrorMessage)
	}
	return out
}

// processAction is a link to an action on an execution, offered where its status allows it.
type processAction struct {
	Label  string
	Href   string
	Danger bool
}

// processActions lists the actions an execution's status allows (the engine checks again).
func processActions(row *driver.ExecutionRow, ret string) []processAction {
	if row.Status.Terminal() || row.Status == driver.ExecutionCompensating {
		return nil
	}
	base := "/tsq/processes/" + row.ID.String() + "/"
	q := "?return=" + url.QueryEscape(ret)
	var out []processAction
	if row.Status == driver.ExecutionWaitingForTSQ {
		out = append(out, processAction{Label: "Retry…", Href: base + "retry" + q})
	}
	switch row.Status {
	case driver.ExecutionWaitingForTSQ, driver.ExecutionWaitingForAsync, driver.ExecutionWaitingForRetry:
		out = append(out, processAction{Label: "Skip step…", Href: base + "skip" + q})
	}
	return append(out,
		processAction{Label: "Complete…", Href: base + "complete" + q},
		processAction{Label: "Cancel…", Href: base + "cancel" + q, Danger: true},
		processAction{Label: "Compensate and cancel…", Href: base + "compensate" + q, Danger: true},
	)
}

// executionAudit is the audit log of an execution, newest first.
func (c *Console) executionAudit(ctx context.Context, id uuid.UUID) ([]*commandbus.AuditLogEntry, error) {
	return c.client.AuditLog(ctx, &driver.AuditLogListParams{EntityType: "execution", EntityID: id.String(), Limit: 200})
}
