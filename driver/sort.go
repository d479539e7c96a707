package driver

import "sort"

// SortQueueDepths orders depths by queue name; drivers use it so results compare across drivers.
func SortQueueDepths(depths []*QueueDepth) {
	sort.Slice(depths, func(i, j int) bool { return depths[i].Queue < depths[j].Queue })
}

// SortedCommandStats flattens stats keyed by (domain, type) into domain, type order.
func SortedCommandStats(stats map[[2]string]*CommandStat) []*CommandStat {
	out := make([]*CommandStat, 0, len(stats))
	for _, s := range stats {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Domain != out[j].Domain {
			return out[i].Domain < out[j].Domain
		}
		return out[i].Type < out[j].Type
	})
	return out
}

// DefaultListLimit bounds list queries that give no limit; MaxListLimit bounds every list.
const (
	DefaultListLimit = 100
	MaxListLimit     = 10_000
)

// LimitOrDefault applies DefaultListLimit and MaxListLimit.
func LimitOrDefault(limit int) int {
	switch {
	case limit <= 0:
		return DefaultListLimit
	case limit > MaxListLimit:
		return MaxListLimit
	}
	return limit
}
