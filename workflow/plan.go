package workflow

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"

	"github.com/commandbus/commandbus"
)

// plan is the DAG one execution runs: the definition's, or, when steps expand over items of the
// input, the definition with each such step replaced by its instances (in the step's layer, each
// with its own record, retries and compensation; the step's dependants wait for all of them).
type plan struct {
	layers [][]string
	steps  map[string]*stepDef
	order  []*stepDef // declaration order, instances in place of their step
	layer  map[string]int
}

func newPlan(layers [][]string, order []*stepDef) *plan {
	p := &plan{layers: layers, steps: make(map[string]*stepDef, len(order)), order: order, layer: map[string]int{}}
	for _, s := range order {
		p.steps[s.id] = s
	}
	for i, l := range layers {
		for _, id := range l {
			p.layer[id] = i
		}
	}
	return p
}

// planFor returns the plan of an execution with input. A definition without expanded steps has
// one plan for every execution.
func (m *Manager) planFor(input json.RawMessage) (*plan, error) {
	if !m.expands {
		return m.base, nil
	}
	instances := map[string][]*stepDef{}
	for _, s := range m.def.steps {
		if s.expand == nil {
			continue
		}
		items, err := s.expand.Items(input)
		if err != nil {
			return nil, commandbus.Permanent(CodeExpansionFailed, fmt.Errorf("expanding step %q: %w", s.id, err))
		}
		seen := map[string]bool{}
		list := make([]*stepDef, 0, len(items))
		for n, item := range items {
			suffix := "#" + strconv.Itoa(n)
			key := strconv.Itoa(n)
			if s.expand.Key != nil {
				if key, err = s.expand.Key(item); err != nil {
					return nil, commandbus.Permanent(CodeExpansionFailed, fmt.Errorf("expanding step %q, item %d: %w", s.id, n, err))
				}
				suffix = ":" + key
			}
			id := s.id + suffix
			if seen[id] || m.steps[id] != nil {
				return nil, commandbus.Permanent(CodeExpansionFailed, fmt.Errorf("expanding step %q: instance %q is not unique", s.id, id))
			}
			seen[id] = true
			inst := *s
			inst.id, inst.template, inst.item, inst.itemKey, inst.expand = id, s.id, item, key, nil
			list = append(list, &inst)
		}
		instances[s.id] = list
	}
	var order []*stepDef
	for _, s := range m.def.steps {
		if list, ok := instances[s.id]; ok {
			order = append(order, list...)
			continue
		}
		deps := s.deps
		if slices.ContainsFunc(deps, func(d string) bool { _, ok := instances[d]; return ok }) {
			c := *s
			c.deps = nil
			for _, d := range deps {
				if list, ok := instances[d]; ok {
					for _, inst := range list {
						c.deps = append(c.deps, inst.id)
					}
					continue
				}
				c.deps = append(c.deps, d)
			}
			s = &c
		}
		order = append(order, s)
	}
	layers := make([][]string, len(m.topo.Layers))
	for i, l := range m.topo.Layers {
		for _, id := range l {
			if list, ok := instances[id]; ok {
				for _, inst := range list {
					layers[i] = append(layers[i], inst.id)
				}
				continue
			}
			layers[i] = append(layers[i], id)
		}
	}
	return newPlan(layers, order), nil
}
