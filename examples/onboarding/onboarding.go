// Package onboarding is the reference workflow: a customer onboarding flow written as a
// declarative DAG on the workflow model. It verifies the applicant, then runs the KYC check, the
// sanctions screening and (for applicants who ask for credit) the credit check in parallel,
// opens the account and sends the welcome pack. The external checks are simulated, driven by the
// applicant's data, so every path can be shown:
//
//   - a name containing "busy" makes the KYC provider answer "busy" twice (durable retries);
//   - the country "XS" is on the sanctions list: a business failure, so the KYC file opened
//     for the applicant is discarded (its compensation) and the execution ends COMPENSATED;
//   - an email at "bounce.example" fails the welcome pack permanently, so the execution waits in
//     the troubleshooting queue for an operator's retry or skip;
//   - a credit limit of zero skips the credit check.
//
// The workflow also starts from an inbound event: an ApplicationSubmitted event (POST
// /api/events, an AMQP event queue, a Kafka event topic) whose data is the Applicant starts one
// onboarding per event.
package onboarding

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/orchestration"
	"github.com/commandbus/commandbus/workflow"
)

// Type is the workflow id.
const Type = "CustomerOnboarding"

// EventApplicationSubmitted is the inbound event type that starts an onboarding, with the
// Applicant as the event's data.
const EventApplicationSubmitted = "ApplicationSubmitted"

// Applicant is the workflow's input.
type Applicant struct {
	Name        string `json:"name"`
	Email       string `json:"email"`
	Country     string `json:"country"`
	CreditLimit int    `json:"creditLimit"`
}

// Account is the openAccount step's result.
type Account struct {
	Number string `json:"number"`
}

// Flow is a registered onboarding workflow with its simulated providers.
type Flow struct {
	*workflow.Manager
	mu       sync.Mutex
	kycCalls map[string]int // by idempotency key: the simulated provider answers "busy" twice
	Closed   []string       // KYC files discarded by compensations, for tests and the demo
}

// Definition returns the onboarding DAG with its step functions bound to f.
func (f *Flow) Definition() *workflow.Definition {
	retry := workflow.Retry(workflow.RetryPolicy{MaxAttempts: 4, InitialDelay: 500 * time.Millisecond, MaxDelay: 5 * time.Second, Jitter: 0.2})
	return workflow.New(Type, 1).
		Describe("Verify an applicant, run KYC, sanctions and credit checks in parallel, open the account, send the welcome pack").
		Domain("onboarding").
		TriggeredBy(EventApplicationSubmitted).
		Timeout(24*time.Hour).
		Step("verifyApplicant", f.verify, workflow.Timeout(5*time.Second)).
		Step("kyc", f.kyc, workflow.DependsOn("verifyApplicant"), retry, workflow.Compensate(f.discardKYC)).
		Step("sanctions", f.sanctions, workflow.DependsOn("verifyApplicant"), retry).
		Step("creditCheck", f.credit, workflow.DependsOn("verifyApplicant"), retry, workflow.When(func(sc *workflow.StepContext) bool {
			var a Applicant
			return sc.DecodeInput(&a) == nil && a.CreditLimit > 0
		})).
		Step("openAccount", f.openAccount, workflow.DependsOn("kyc", "sanctions", "creditCheck")).
		Step("sendWelcomePack", f.welcome, workflow.DependsOn("openAccount"))
}

// Register registers the onboarding workflow with the runtime.
func Register(rt *orchestration.Runtime) (*Flow, error) {
	f := &Flow{kycCalls: map[string]int{}}
	m, err := workflow.Register(rt, f.Definition())
	if err != nil {
		return nil, err
	}
	f.Manager = m
	return f, nil
}

func applicant(sc *workflow.StepContext) (Applicant, error) {
	var a Applicant
	if err := sc.DecodeInput(&a); err != nil {
		return a, commandbus.Permanent(commandbus.CodeInvalidData, err)
	}
	return a, nil
}

func (f *Flow) verify(_ context.Context, sc *workflow.StepContext) (any, error) {
	a, err := applicant(sc)
	if err != nil {
		return nil, err
	}
	var problems []string
	if strings.TrimSpace(a.Name) == "" {
		problems = append(problems, "name is required")
	}
	if !strings.Contains(a.Email, "@") {
		problems = append(problems, "email is not an address")
	}
	if len(a.Country) != 2 {
		problems = append(problems, "country must be a two-letter code")
	}
	if len(problems) > 0 {
		return nil, commandbus.BusinessRule("APPLICANT_INVALID", strings.Join(problems, "; "))
	}
	return map[string]string{"verified": a.Email}, nil
}

func (f *Flow) kyc(_ context.Context, sc *workflow.StepContext) (any, error) {
	a, err := applicant(sc)
	if err != nil {
		return nil, err
	}
	if strings.Contains(strings.ToLower(a.Name), "busy") {
		f.mu.Lock()
		f.kycCalls[sc.Key()]++
		n := f.kycCalls[sc.Key()]
		f.mu.Unlock()
		if n <= 2 {
			return nil, commandbus.Transient(fmt.Errorf("KYC provider busy (call %d)", n))
		}
	}
	return map[string]string{"kycFile": "KYC-" + sc.ExecutionID.String()[:8]}, nil
}

func (f *Flow) discardKYC(_ context.Context, sc *workflow.StepContext) error {
	var file map[string]string
	if err := sc.Result("kyc", &file); err != nil {
		return err
	}
	f.mu.Lock()
	f.Closed = append(f.Closed, file["kycFile"])
	f.mu.Unlock()
	return nil
}

func (f *Flow) sanctions(_ context.Context, sc *workflow.StepContext) (any, error) {
	a, err := applicant(sc)
	if err != nil {
		return nil, err
	}
	if strings.EqualFold(a.Country, "XS") {
		return nil, commandbus.BusinessRule("SANCTIONED_COUNTRY", "applicants from "+a.Country+" cannot be onboarded")
	}
	return map[string]bool{"clear": true}, nil
}

func (f *Flow) credit(_ context.Context, sc *workflow.StepContext) (any, error) {
	a, err := applicant(sc)
	if err != nil {
		return nil, err
	}
	return map[string]int{"approvedLimit": min(a.CreditLimit, 10_000)}, nil
}

func (f *Flow) openAccount(_ context.Context, sc *workflow.StepContext) (any, error) {
	return Account{Number: "ACC-" + strings.ToUpper(sc.ExecutionID.String()[24:])}, nil
}

func (f *Flow) welcome(_ context.Context, sc *workflow.StepContext) (any, error) {
	a, err := applicant(sc)
	if err != nil {
		return nil, err
	}
	var acc Account
	if err := sc.Result("openAccount", &acc); err != nil {
		return nil, err
	}
	if strings.HasSuffix(a.Email, "@bounce.example") {
		return nil, commandbus.Permanent("MAILBOX_UNKNOWN", errors.New("the welcome pack bounced: "+a.Email))
	}
	return map[string]string{"sentTo": a.Email, "account": acc.Number}, nil
}
