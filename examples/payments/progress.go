package payments

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
)

// Progress says whether a batch's payments have settled: each is terminal, parked in the
// troubleshooting queue, waiting for an operator, or waiting out a wait the simulated network
// will never answer (a timeout roll: the wait times out into the TSQ). Anything else still moves:
// it runs, waits for a reply or a due retry, or waits for an answer the simulator will give.
type Progress struct {
	Total    int `json:"total"`
	Terminal int `json:"terminal"`
	InTSQ    int `json:"inTsq"`
	// AwaitingOperator counts payments waiting for a risk approval or a network answer that
	// only an operator gives, or for a command parked in the command troubleshooting queue.
	AwaitingOperator int `json:"awaitingOperator"`
	// AwaitingTimeout counts payments waiting for a network answer the simulator will never
	// give: their wait times out.
	AwaitingTimeout int `json:"awaitingTimeout"`
	// Moving counts the others.
	Moving int `json:"moving"`
	// Scheduled counts the answers this instance's simulator has scheduled and not given yet.
	Scheduled int `json:"scheduled"`
	// Unwinding counts the terminal payments (counted in Terminal too) with a command they sent
	// still to run: a compensation sent as the process unwound (CancelFx, ReleaseHold). Their
	// effects are undone once it ran.
	Unwinding int `json:"unwinding"`
}

// Settled reports whether nothing will move any more without an operator or a wait timeout.
func (p *Progress) Settled() bool { return p.Moving == 0 && p.Scheduled == 0 && p.Unwinding == 0 }

// BatchProgress classifies the payments of a batch (every payment when batchID is uuid.Nil).
func (p *Platform) BatchProgress(ctx context.Context, batchID uuid.UUID) (*Progress, error) {
	out := &Progress{Scheduled: p.sim.scheduled()}
	pendingNetwork := map[string]bool{} // payment id|level with an answer left for an operator
	rows, err := p.store.db.QueryContext(ctx, p.store.q(`SELECT payment_id, level FROM {t}network_pending WHERE status = 'PENDING'`))
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var id string
		var level int
		if err := rows.Scan(&id, &level); err != nil {
			rows.Close()
			return nil, err
		}
		pendingNetwork[fmt.Sprintf("%s|awaitL%d", id, level)] = true
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	parked, err := p.commandOwners(ctx, driver.CommandStatusInTSQ)
	if err != nil {
		return nil, err
	}
	live, err := p.commandOwners(ctx, driver.CommandStatusPending, driver.CommandStatusRunning)
	if err != nil {
		return nil, err
	}
	err = p.eachExecution(ctx, batchID, func(row *driver.ExecutionRow) error {
		out.Total++
		switch {
		case row.Status.Terminal() && live[row.ID]:
			// Ended, but a command it sent still runs: a compensation (CancelFx, ReleaseHold)
			// sent as the process unwound. Its effects settle only once that command ran.
			out.Terminal++
			out.Unwinding++
		case row.Status.Terminal():
			out.Terminal++
		case row.Status == driver.ExecutionWaitingForTSQ:
			out.InTSQ++
		case row.Status == driver.ExecutionWaitingForAsync && parked[row.ID]:
			out.AwaitingOperator++ // its command waits in the command troubleshooting queue, and says so by no reply
		case row.Status == driver.ExecutionWaitingForAsync && row.Type == TypePaymentStep &&
			(row.CurrentWait == StepAwaitRiskApproval || strings.HasPrefix(row.CurrentWait, "awaitL")):
			var st StepState
			if err := json.Unmarshal(row.State, &st); err != nil {
				return err
			}
			switch p.sim.expect(row.ID, row.CurrentWait, &st, pendingNetwork[st.PaymentID.String()+"|"+row.CurrentWait]) {
			case expectOperator:
				out.AwaitingOperator++
			case expectTimeout:
				out.AwaitingTimeout++
			default:
				out.Moving++
			}
		default:
			out.Moving++
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// commandOwners returns the executions with a command in one of statuses. For IN_TSQ these are
// the executions with a command parked in the command troubleshooting queue that wait for an
// operator without being told: a command that asked for a PARKED reply (HeaderNotifyParked, as
// command steps do) moves its execution to the process troubleshooting queue once that reply is
// applied, so until then the execution still moves.
func (p *Platform) commandOwners(ctx context.Context, statuses ...driver.CommandStatus) (map[uuid.UUID]bool, error) {
	out := map[uuid.UUID]bool{}
	before := uuid.Nil
	for {
		rows, err := p.exec.CommandList(ctx, &driver.CommandListParams{Statuses: statuses, BeforeID: before, Limit: driver.MaxListLimit})
		if err != nil {
			return nil, err
		}
		for _, r := range rows {
			if r.CorrelationID != uuid.Nil && (r.Status != driver.CommandStatusInTSQ || r.Headers[commandbus.HeaderNotifyParked] != "true") {
				out[r.CorrelationID] = true
			}
		}
		if len(rows) < driver.MaxListLimit {
			return out, nil
		}
		before = rows[len(rows)-1].ID
	}
}

// expectation is what a waiting step-process payment will get from the simulator.
type expectation int

const (
	expectAnswer   expectation = iota // the simulator answers (now or when its delay ends)
	expectOperator                    // only an operator answers
	expectTimeout                     // nobody answers: the wait times out
)

// expect tells what the simulator will do for an execution waiting on wait. pendingForOperator
// says the network left the wait's answer to an operator.
func (s *simulator) expect(execID uuid.UUID, wait string, st *StepState, pendingForOperator bool) expectation {
	if s.p.opts.DisableSimulator {
		return expectOperator
	}
	if wait == StepAwaitRiskApproval {
		if st.RiskApproved || st.RiskDeclined || st.ApprovalID == "" {
			return expectAnswer
		}
		key := execID.String() + "|" + StepAwaitRiskApproval
		switch st.Behavior.Step(StepAwaitRiskApproval).roll(s.seed(&st.PaymentDetails), key).Outcome {
		case OutcomePending:
			return expectOperator
		case OutcomeTimeout:
			return expectTimeout
		}
		return expectAnswer
	}
	if pendingForOperator {
		return expectOperator
	}
	var level int
	if _, err := fmt.Sscanf(wait, "awaitL%d", &level); err != nil || level < 1 || level > 4 {
		return expectAnswer
	}
	c := st.level(level)
	if c.Received {
		return expectAnswer // the process moves on
	}
	key := fmt.Sprintf("%s|%s|%d", execID, wait, c.TransientErrors)
	switch st.Behavior.Step(wait).roll(s.seed(&st.PaymentDetails), key).Outcome {
	case OutcomeTimeout:
		return expectTimeout
	case OutcomePending:
		return expectOperator // its answer is being left to an operator
	}
	return expectAnswer
}

// scheduled counts the answers the simulator has drawn a delay for and not given yet.
func (s *simulator) scheduled() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	now := time.Now()
	for _, at := range s.handled {
		if !at.IsZero() && now.Before(at) {
			n++
		}
	}
	return n
}
