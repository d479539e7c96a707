package console

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/commandbus/commandbus/driver"
)

// compensationPath is what an execution's log tells of its compensation phase: the policy and
// the failure that started it, then every compensation attempt in the order it ended, and which
// steps ended compensated, failed or given up by an operator. Every model that compensates
// writes COMPENSATION entries (processes, workflows, sagas), so the page shows it for any of them.
type compensationPath struct {
	// Policy is the saga's compensation policy ("" for models without one).
	Policy string
	// Cause is the failure that started the phase; Started when.
	Cause   string
	Started *time.Time
	// Attempts are the compensation attempts and operator skips, in log order.
	Attempts []compensationAttempt
	// Compensated lists the steps compensated, in the order their compensations succeeded;
	// Failed those whose last attempt failed for good; Skipped those an operator gave up.
	Compensated, Failed, Skipped []string
}

// compensationAttempt is one entry of the path.
type compensationAttempt struct {
	Seq     int
	At      time.Time
	Step    string
	Outcome string // compensated, failed, retry scheduled, skipped by an operator
	Class   string // ok, bad, warn: the badge of the outcome (the text says it too)
	Attempt int
	Of      int
	Took    time.Duration
	Error   string
	Actor   string
}

// compensationOf reads the compensation path from an execution's log; nil when nothing was
// compensated nor started to be.
func compensationOf(log []*driver.ExecutionLogEntry) *compensationPath {
	var p *compensationPath
	started := func() {
		if p == nil {
			p = &compensationPath{}
		}
	}
	last := map[string]string{}
	var order []string
	for _, e := range log {
		switch {
		case e.EntryType == "LIFECYCLE" && (e.Name == "COMPENSATION_STARTED" || e.Name == "compensation" && e.StepStatus == string(driver.ExecutionCompensating)):
			started()
			if p.Started == nil {
				at := e.At
				p.Started, p.Cause = &at, strings.TrimPrefix(e.ErrorCode+": "+e.ErrorMessage, ": ")
				var info struct {
					Policy string `json:"policy"`
				}
				if e.Name == "COMPENSATION_STARTED" && json.Unmarshal(e.Request, &info) == nil {
					p.Policy = info.Policy
				}
			}
		case e.EntryType == "COMPENSATION":
			started()
			a := compensationAttempt{Seq: e.Seq, At: e.At, Step: e.Name, Attempt: e.Attempt, Of: e.MaxAttempts, Error: e.ErrorMessage, Actor: e.Actor}
			if d, ok := e.Latency(); ok {
				a.Took = d
			}
			switch s := e.StepStatus; {
			case s == "COMPLETED" || s == "COMPENSATION_SUCCESS":
				a.Outcome, a.Class = "compensated", "ok"
			case s == "RETRY_SCHEDULED":
				a.Outcome, a.Class = "failed, retry scheduled", "warn"
			case strings.Contains(s, "SKIPPED"):
				a.Outcome, a.Class = "skipped by an operator", "warn"
			default:
				a.Outcome, a.Class = "failed", "bad"
			}
			p.Attempts = append(p.Attempts, a)
			if _, seen := last[e.Name]; !seen {
				order = append(order, e.Name)
			}
			last[e.Name] = a.Outcome
		case e.EntryType == "TSQ_SKIP" && p != nil && last[e.Name] == "failed":
			// A saga's failed compensation an operator gave up.
			p.Attempts = append(p.Attempts, compensationAttempt{Seq: e.Seq, At: e.At, Step: e.Name, Outcome: "skipped by an operator",
				Class: "warn", Actor: e.Actor, Error: e.Reason})
			last[e.Name] = "skipped by an operator"
		}
	}
	if p == nil {
		return nil
	}
	for _, a := range p.Attempts {
		if a.Outcome == "compensated" && last[a.Step] == "compensated" {
			p.Compensated = append(p.Compensated, a.Step)
		}
	}
	for _, step := range order {
		switch last[step] {
		case "failed":
			p.Failed = append(p.Failed, step)
		case "skipped by an operator":
			p.Skipped = append(p.Skipped, step)
		}
	}
	return p
}
