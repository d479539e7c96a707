package console

import (
	"fmt"
	"time"

	"github.com/commandbus/commandbus/orchestration"
)

// The definition page draws a declarative model's DAG as server-side SVG: one column per layer,
// left to right, one box per step, and a line per dependency from the right edge of the step it
// depends on to the left edge of the step that waits for it.

// dagBox is one step drawn in the DAG.
type dagBox struct {
	ID     string
	Kind   string
	Detail string
	Layer  int
	X, Y   int
	W, H   int
	// TextX and TextY place the step's name; KindY its kind below.
	TextX, TextY, KindY int
}

// dagLine is one dependency drawn in the DAG.
type dagLine struct {
	From, To string
	Path     string
}

// dagPicture is a DAG laid out for its SVG.
type dagPicture struct {
	Width, Height int
	Boxes         []*dagBox
	Lines         []*dagLine
}

const (
	dagBoxW   = 170
	dagBoxH   = 46
	dagColGap = 70
	dagRowGap = 22
	dagPad    = 16
)

// layoutDAG lays a topology out: layers are columns, a layer's steps are stacked top to bottom,
// each column centred on the tallest. steps, when known, give each box its kind.
func layoutDAG(topo *orchestration.Topology, steps []orchestration.StepInfo) *dagPicture {
	info := map[string]orchestration.StepInfo{}
	for _, s := range steps {
		info[s.ID] = s
	}
	rows := 0
	for _, layer := range topo.Layers {
		rows = max(rows, len(layer))
	}
	pic := &dagPicture{
		Width:  2*dagPad + len(topo.Layers)*dagBoxW + max(len(topo.Layers)-1, 0)*dagColGap,
		Height: 2*dagPad + rows*dagBoxH + max(rows-1, 0)*dagRowGap,
	}
	byID := map[string]*dagBox{}
	for li, layer := range topo.Layers {
		colH := len(layer)*dagBoxH + max(len(layer)-1, 0)*dagRowGap
		top := dagPad + (pic.Height-2*dagPad-colH)/2
		for si, id := range layer {
			b := &dagBox{ID: id, Kind: orchestration.StepKindLocal, Layer: li, W: dagBoxW, H: dagBoxH,
				X: dagPad + li*(dagBoxW+dagColGap), Y: top + si*(dagBoxH+dagRowGap)}
			if s, ok := info[id]; ok {
				b.Kind, b.Detail = s.Kind, stepDetail(s)
			} else if len(steps) == 0 {
				b.Kind = "step"
			}
			b.TextX, b.TextY, b.KindY = b.X+10, b.Y+19, b.Y+36
			byID[id] = b
			pic.Boxes = append(pic.Boxes, b)
		}
	}
	for _, e := range topo.Edges {
		from, to := byID[e.From], byID[e.To]
		if from == nil || to == nil {
			continue
		}
		x1, y1 := from.X+from.W, from.Y+from.H/2
		x2, y2 := to.X, to.Y+to.H/2
		mid := (x1 + x2) / 2
		pic.Lines = append(pic.Lines, &dagLine{From: e.From, To: e.To,
			Path: fmt.Sprintf("M%d %d C%d %d, %d %d, %d %d", x1, y1, mid, y1, mid, y2, x2-4, y2)})
	}
	return pic
}

// stepDetail is the line under a step's kind: what it waits for or starts.
func stepDetail(s orchestration.StepInfo) string {
	var d string
	switch s.Kind {
	case orchestration.StepKindSignal:
		d = "signal " + s.Signal
		if s.SignalTimeout > 0 {
			d += ", times out after " + s.SignalTimeout.String()
		}
	case orchestration.StepKindSleep:
		d = "sleeps " + s.Sleep.Round(time.Millisecond).String()
	case orchestration.StepKindChild:
		d = "starts workflow " + s.ChildType
	case orchestration.StepKindCommand:
		d = "sends " + s.CommandType + " to " + s.CommandDomain
	}
	if s.Conditional {
		d = joinDetail(d, "runs when its condition holds")
	}
	if s.Compensated {
		d = joinDetail(d, "compensated on failure")
	}
	return d
}

func joinDetail(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}
