package console

import (
	"fmt"
	"html"
	"html/template"
	"math"
	"strconv"
	"strings"
	"time"
)

// chart is one of the overview's line charts: an inline SVG drawn on the server, with its
// numbers also in text for those who cannot see it.
type chart struct {
	ID      string
	Title   string
	Unit    string
	SVG     template.HTML
	Latest  float64
	Peak    float64
	Average float64
	HasData bool
}

type chartSpec struct {
	id, title, unit string
	rate            bool // a rate needs two samples; the first one has none
	value           func(sample) float64
}

var chartSpecs = []chartSpec{
	{"chart-commands", "Commands completed per second", "/s", true, func(s sample) float64 { return s.CommandsPerSecond }},
	{"chart-processes", "Processes completed per second", "/s", true, func(s sample) float64 { return s.ProcessesPerSecond }},
	{"chart-queue", "Commands waiting in queues", "", false, func(s sample) float64 { return s.QueueDepth }},
	{"chart-tsq", "Items in the troubleshooting queues", "", false, func(s sample) float64 { return s.TSQ }},
}

type chartPoint struct {
	at    time.Time
	value float64
}

// buildCharts draws the charts of the samples of the last 15 minutes.
func buildCharts(samples []sample, interval time.Duration, now time.Time) []chart {
	out := make([]chart, 0, len(chartSpecs))
	for _, spec := range chartSpecs {
		var pts []chartPoint
		sum := 0.0
		c := chart{ID: spec.id, Title: spec.title, Unit: spec.unit}
		for _, s := range samples {
			if spec.rate && !s.Rates {
				continue
			}
			v := spec.value(s)
			pts = append(pts, chartPoint{s.At, v})
			sum += v
			c.Peak = math.Max(c.Peak, v)
		}
		if len(pts) > 0 {
			c.HasData = true
			c.Latest = pts[len(pts)-1].value
			c.Average = sum / float64(len(pts))
		}
		c.SVG = renderChart(c, pts, interval, now)
		out = append(out, c)
	}
	return out
}

// niceCeil rounds up to 1, 2 or 5 times a power of ten, so the axis reads easily.
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

func axisLabel(v float64) string {
	if v != math.Trunc(v) {
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	return formatNumber(v)
}

// renderChart draws a line (and the area under it) over the last 15 minutes. A gap in the
// samples (a failed sample, a restart) breaks the line rather than drawing across it.
func renderChart(c chart, pts []chartPoint, interval time.Duration, now time.Time) template.HTML {
	const width, height, left, right, top, bottom = 640.0, 180.0, 56.0, 14.0, 12.0, 28.0
	plotW, plotH := width-left-right, height-top-bottom
	top2 := niceCeil(c.Peak)
	x := func(t time.Time) float64 {
		f := 1 - now.Sub(t).Seconds()/consoleWindow.Seconds()
		return left + plotW*math.Min(math.Max(f, 0), 1)
	}
	y := func(v float64) float64 { return top + plotH*(1-math.Min(v/top2, 1)) }

	var b strings.Builder
	title := html.EscapeString(c.Title)
	desc := "No samples yet."
	if c.HasData {
		desc = fmt.Sprintf("Over the last 15 minutes: latest %s%s, average %s%s, peak %s%s.",
			strconv.FormatFloat(c.Latest, 'f', 1, 64), c.Unit, strconv.FormatFloat(c.Average, 'f', 1, 64), c.Unit,
			strconv.FormatFloat(c.Peak, 'f', 1, 64), c.Unit)
	}
	fmt.Fprintf(&b, `<svg class="chart" viewBox="0 0 %g %g" role="img" aria-labelledby="%s-title %s-desc" xmlns="http://www.w3.org/2000/svg">`,
		width, height, c.ID, c.ID)
	fmt.Fprintf(&b, `<title id="%s-title">%s, last 15 minutes</title><desc id="%s-desc">%s</desc>`, c.ID, title, c.ID, html.EscapeString(desc))
	for _, v := range []float64{0, top2 / 2, top2} {
		fmt.Fprintf(&b, `<line x1="%g" x2="%g" y1="%.1f" y2="%.1f" stroke="#d0d7de" stroke-width="1"/>`, left, width-right, y(v), y(v))
		fmt.Fprintf(&b, `<text x="%g" y="%.1f" text-anchor="end" font-size="12" fill="#374151">%s</text>`, left-6, y(v)+4, axisLabel(v))
	}
	for i, label := range []string{"−15 min", "−10 min", "−5 min", "now"} {
		t := now.Add(-consoleWindow + time.Duration(i)*5*time.Minute)
		anchor := "middle"
		if i == 3 {
			anchor = "end"
		}
		fmt.Fprintf(&b, `<text x="%.1f" y="%g" text-anchor="%s" font-size="12" fill="#374151">%s</text>`, x(t), height-8, anchor, label)
	}
	for _, run := range splitRuns(pts, interval) {
		var line strings.Builder
		for _, p := range run {
			fmt.Fprintf(&line, "%.1f,%.1f ", x(p.at), y(p.value))
		}
		if len(run) == 1 {
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="2.5" fill="#0b57d0"/>`, x(run[0].at), y(run[0].value))
			continue
		}
		area := fmt.Sprintf("%.1f,%.1f %s%.1f,%.1f", x(run[0].at), y(0), line.String(), x(run[len(run)-1].at), y(0))
		fmt.Fprintf(&b, `<polygon points="%s" fill="#0b57d0" fill-opacity="0.12"/>`, area)
		fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke="#0b57d0" stroke-width="2" stroke-linejoin="round"/>`, strings.TrimSpace(line.String()))
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) //nolint:gosec // built from numbers and escaped constants only
}

// splitRuns cuts the points where more than two and a half intervals passed between samples.
func splitRuns(pts []chartPoint, interval time.Duration) [][]chartPoint {
	var runs [][]chartPoint
	start := 0
	for i := 1; i <= len(pts); i++ {
		if i == len(pts) || pts[i].at.Sub(pts[i-1].at) > interval*5/2 {
			if i > start {
				runs = append(runs, pts[start:i])
			}
			start = i
		}
	}
	return runs
}
