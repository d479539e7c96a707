package saga_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/internal/clock"
	"github.com/commandbus/commandbus/internal/dbtest"
	"github.com/commandbus/commandbus/orchestration"
	"github.com/commandbus/commandbus/saga"
)

type lineItem struct {
	SKU string `json:"sku"`
	Qty int    `json:"qty"`
}

type order struct {
	ID    string     `json:"id"`
	Items []lineItem `json:"items"`
}

func lineItems(o order) []lineItem { return o.Items }

func TestExpandEach(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		in := order{ID: "o-1", Items: []lineItem{{"SKU-1", 2}, {"SKU-2", 1}, {"SKU-3", 5}}}

		t.Run("OneItemFails", func(t *testing.T) {
			t.Parallel()
			client, rt := newRuntime(t, drv, testConfig(t, clock.NewFake(testStart)))
			j := &journal{}
			reserve := func(ctx context.Context, sc *saga.StepContext) (any, error) {
				item, err := saga.Item[lineItem](sc)
				if err != nil {
					return nil, err
				}
				j.add("do:" + sc.Step)
				if item.SKU == "SKU-2" {
					return nil, commandbus.BusinessRule("OUT_OF_STOCK", "SKU-2 is out of stock")
				}
				return map[string]any{"sku": item.SKU, "reserved": item.Qty, "key": sc.ItemKey()}, nil
			}
			def := saga.New("fulfil", 1).
				Step("reserve", reserve, saga.ExpandEach(lineItems, func(it lineItem) string { return it.SKU }), saga.Compensate(undo(j))).
				Step("charge", okStep(j), saga.DependsOn("reserve"), saga.Compensate(undo(j)))
			m, err := saga.Register(rt, def)
			require.NoError(t, err)
			start(t, client)
			id, err := m.Start(ctx, in)
			require.NoError(t, err)
			r := waitStatus(t, m, id, driver.ExecutionCompensated)
			require.Equal(t, []string{"reserve:SKU-1", "reserve:SKU-2", "reserve:SKU-3", "charge"}, r.Order)
			require.ElementsMatch(t, []string{"reserve:SKU-1", "reserve:SKU-3"}, r.CompensatedSteps, "each completed instance is compensated")
			require.Equal(t, []string{"reserve:SKU-2"}, r.FailedSteps)
			require.Equal(t, saga.StepPending, r.Steps["charge"].Status, "the dependant waits for every instance")
			require.Zero(t, j.n("do:charge"))
			one := r.Steps["reserve:SKU-1"]
			require.Equal(t, "reserve", one.InstanceOf)
			require.JSONEq(t, `{"sku":"SKU-1","reserved":2,"key":"SKU-1"}`, string(one.Result))
			require.Equal(t, "OUT_OF_STOCK", r.Steps["reserve:SKU-2"].ErrorCode)
		})

		t.Run("IndexedInstancesRetryAlone", func(t *testing.T) {
			t.Parallel()
			fake := clock.NewFake(testStart)
			client, rt := newRuntime(t, drv, testConfig(t, fake))
			j := &journal{}
			reserve := func(ctx context.Context, sc *saga.StepContext) (any, error) {
				item, err := saga.Item[lineItem](sc)
				if err != nil {
					return nil, err
				}
				if j.add("do:"+sc.Step) == 1 && sc.Step == "reserve#1" {
					return nil, commandbus.Transient(errors.New("warehouse busy"))
				}
				return item.SKU, nil
			}
			charge := func(ctx context.Context, sc *saga.StepContext) (any, error) {
				var skus []string
				for _, s := range []string{"reserve#0", "reserve#1", "reserve#2"} {
					var sku string
					if err := sc.Result(s, &sku); err != nil {
						return nil, err
					}
					skus = append(skus, sku)
				}
				return skus, nil
			}
			def := saga.New("fulfil-indexed", 1).
				Step("reserve", reserve, saga.ExpandEach(lineItems, nil), saga.Compensate(undo(j)),
					saga.Retry(saga.RetryPolicy{MaxAttempts: 2, InitialDelay: time.Second})).
				Step("charge", charge, saga.DependsOn("reserve"))
			m, err := saga.Register(rt, def)
			require.NoError(t, err)
			start(t, client)
			id, err := m.Start(ctx, in)
			require.NoError(t, err)
			waitStatus(t, m, id, driver.ExecutionWaitingForRetry)
			fake.Advance(time.Second)
			r := waitStatus(t, m, id, driver.ExecutionCompleted)
			require.True(t, r.Success)
			require.Equal(t, 2, r.Steps["reserve#1"].Attempts, "the failing instance retried on its own")
			require.Equal(t, 1, r.Steps["reserve#0"].Attempts)
			require.Equal(t, 1, j.n("do:reserve#0"))
			require.JSONEq(t, `["SKU-1","SKU-2","SKU-3"]`, string(r.Steps["charge"].Result))
		})

		t.Run("BadInputParks", func(t *testing.T) {
			t.Parallel()
			client, rt := newRuntime(t, drv, testConfig(t, clock.NewFake(testStart)))
			m, err := saga.Register(rt, saga.New("fulfil-bad", 1).
				Step("reserve", okStep(&journal{}), saga.ExpandEach(lineItems, func(it lineItem) string { return it.SKU })))
			require.NoError(t, err)
			start(t, client)
			id, err := m.Start(ctx, order{Items: []lineItem{{"SKU-1", 1}, {"SKU-1", 2}}})
			require.NoError(t, err)
			r := waitStatus(t, m, id, driver.ExecutionWaitingForTSQ)
			require.Equal(t, "EXPANSION_FAILED", r.ErrorCode)
			require.Contains(t, r.Error, `instance "reserve:SKU-1" is not unique`)
		})
	})
}

// The definition describes its policy and its steps' compensation settings; a step whose
// condition does not hold is skipped and has nothing to compensate.
func TestDescribeAndConditionalSteps(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	client, rt := newRuntime(t, dbtest.SQLite(t), testConfig(t, clock.NewFake(testStart)))
	j := &journal{}
	def := saga.New("described", 1).Policy(saga.CircuitBreaker).
		Step("reserve", okStep(j), saga.ExpandEach(lineItems, nil), saga.Compensate(undo(j))).
		Step("charge", okStep(j), saga.DependsOn("reserve"), saga.Compensate(undo(j)), saga.Critical()).
		Step("gift", okStep(j), saga.DependsOn("charge"), saga.Compensate(undo(j)),
			saga.When(func(sc *saga.StepContext) bool { return false })).
		Step("ship", failBusiness(j), saga.DependsOn("gift"))
	m, err := saga.Register(rt, def)
	require.NoError(t, err)
	d := orchestration.Describe(m)
	require.Equal(t, "saga", d.Model)
	require.Equal(t, "CIRCUIT_BREAKER", d.CompensationPolicy)
	steps := map[string]orchestration.StepInfo{}
	for _, s := range orchestration.StepsOf(m) {
		steps[s.ID] = s
	}
	require.True(t, steps["reserve"].ExpandEach)
	require.True(t, steps["charge"].CompensationCritical)
	require.True(t, steps["gift"].Conditional)
	start(t, client)
	id, err := m.Start(ctx, order{Items: []lineItem{{"SKU-1", 1}}})
	require.NoError(t, err)
	r := waitStatus(t, m, id, driver.ExecutionCompensated)
	require.Equal(t, saga.StepSkipped, r.Steps["gift"].Status)
	require.Equal(t, []string{"charge", "reserve#0"}, r.CompensatedSteps)
	require.Zero(t, j.n("undo:gift"))
}

// An instance that fails permanently parks the saga; the operator skips that instance by its id
// and the saga goes on.
func TestSkipAnExpandedInstance(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, drv driver.Driver) {
		ctx := context.Background()
		client, rt := newRuntime(t, drv, testConfig(t, clock.NewFake(testStart)))
		j := &journal{}
		reserve := func(ctx context.Context, sc *saga.StepContext) (any, error) {
			j.add("do:" + sc.Step)
			if sc.ItemKey() == "SKU-2" {
				return nil, commandbus.Permanent("DISCONTINUED", errors.New("SKU-2 is discontinued"))
			}
			return nil, nil
		}
		m, err := saga.Register(rt, saga.New("skip-instance", 1).
			Step("reserve", reserve, saga.ExpandEach(lineItems, func(it lineItem) string { return it.SKU })).
			Step("charge", okStep(j), saga.DependsOn("reserve")))
		require.NoError(t, err)
		start(t, client)
		id, err := m.Start(ctx, order{Items: []lineItem{{"SKU-1", 1}, {"SKU-2", 1}}})
		require.NoError(t, err)
		r := waitStatus(t, m, id, driver.ExecutionWaitingForTSQ)
		require.Equal(t, "DISCONTINUED", r.ErrorCode)
		var ve *commandbus.ValidationError
		require.ErrorAs(t, m.Skip(ctx, id, "ghost", nil, operator), &ve)
		require.ErrorIs(t, m.Skip(ctx, id, "reserve:SKU-9", nil, operator), commandbus.ErrInvalidState)
		require.NoError(t, m.Skip(ctx, id, "reserve:SKU-2", json.RawMessage(`{"substituted":"SKU-3"}`), operator))
		r = waitStatus(t, m, id, driver.ExecutionCompleted)
		require.JSONEq(t, `{"substituted":"SKU-3"}`, string(r.Steps["reserve:SKU-2"].Result))
		require.Equal(t, 1, j.n("do:charge"))
	})
}
