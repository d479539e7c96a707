package workflow_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus/internal/clock"
	"github.com/commandbus/commandbus/internal/dbtest"
	"github.com/commandbus/commandbus/workflow"
)

// Steps describes every step of a registered definition, in the order they were added, with its
// kind, what it waits for and its dependencies.
func TestManagerSteps(t *testing.T) {
	t.Parallel()
	_, rt := newRuntime(t, dbtest.SQLite(t), clock.NewFake(testStart))
	step := func(context.Context, *workflow.StepContext) (any, error) { return nil, nil }
	_, err := workflow.Register(rt, workflow.New("steps-child", 1).Step("only", step))
	require.NoError(t, err)
	m, err := workflow.Register(rt, workflow.New("steps-described", 1).
		Step("prepare", step, workflow.Compensate(func(context.Context, *workflow.StepContext) error { return nil })).
		WaitSignal("approval", "approve", workflow.DependsOn("prepare"), workflow.SignalTimeout(time.Minute, workflow.TimeoutBranch)).
		Sleep("coolOff", time.Hour, workflow.DependsOn("prepare")).
		Child("kyc", "steps-child", func(*workflow.StepContext) (any, error) { return nil, nil }, workflow.DependsOn("approval", "coolOff"),
			workflow.When(func(*workflow.StepContext) bool { return true })).
		Command("bookRisk", "risk", "BookRisk", func(*workflow.StepContext) (any, error) { return nil, nil }, workflow.DependsOn("kyc")))
	require.NoError(t, err)
	require.Equal(t, []workflow.StepInfo{
		{ID: "prepare", Kind: workflow.StepKindLocal, Compensated: true},
		{ID: "approval", Kind: workflow.StepKindSignal, Signal: "approve", SignalTimeout: time.Minute, DependsOn: []string{"prepare"}},
		{ID: "coolOff", Kind: workflow.StepKindSleep, Sleep: time.Hour, DependsOn: []string{"prepare"}},
		{ID: "kyc", Kind: workflow.StepKindChild, ChildType: "steps-child", DependsOn: []string{"approval", "coolOff"}, Conditional: true},
		{ID: "bookRisk", Kind: workflow.StepKindCommand, CommandDomain: "risk", CommandType: "BookRisk", DependsOn: []string{"kyc"}},
	}, m.Steps())
}
