package console

import (
	"context"
	"html/template"
	"net/http"
	"sort"
	"time"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
	"github.com/commandbus/commandbus/server/internal/httpx"
)

// domainLoad is one domain's in-flight work against this instance's concurrency limits.
type domainLoad struct {
	Domain       string
	Running      int64
	Limit        int
	ReplyRunning int64
	ReplyLimit   int
	Waiting      int64
	InTSQ        int64
	Enabled      bool
}

type statusCount struct {
	Status string
	Count  int64
}

type overviewData struct {
	Charts         []chart
	SampleInterval time.Duration
	CommandRate    float64
	ProcessRate    float64
	RatesKnown     bool
	Domains        []domainLoad
	Queues         []*commandbus.QueueDepth
	CommandTSQ     int64
	ProcessTSQ     int64
	DLQ            []*driver.DLQDepth
	DLQTotal       int64
	Executions     []statusCount
	// Cards and extPanels are what the extensions add; Panels are extPanels rendered for one
	// request (a panel may show an operator more than a viewer).
	Cards     []Card
	extPanels []Panel
	Panels    []renderedPanel
}

// renderedPanel is an extension's overview panel rendered for one request.
type renderedPanel struct {
	ID, Title          string
	Body               template.HTML
	LinkHref, LinkText string
}

var overviewRegions = []string{"ov-summary", "ov-charts", "ov-load"}

func (c *Console) overviewPage(w http.ResponseWriter, r *http.Request) (*Page, error) {
	d, err := c.overviewData(r.Context())
	if err != nil {
		return nil, err
	}
	p := c.newPage(w, r, "Overview", "overview")
	p.LiveURL = "/live/overview"
	if len(d.extPanels) > 0 {
		shown := *d // d is shared by every viewer: render the panels into a copy
		shown.Panels = make([]renderedPanel, 0, len(d.extPanels))
		for _, panel := range d.extPanels {
			fragmentPage := *p
			fragmentPage.Data = panel.Data
			body, err := c.fragment(panel.Template, &fragmentPage)
			if err != nil {
				return nil, err
			}
			shown.Panels = append(shown.Panels, renderedPanel{ID: panel.ID, Title: panel.Title, Body: body,
				LinkHref: panel.LinkHref, LinkText: panel.LinkText})
		}
		d = &shown
	}
	p.Data = d
	return p, nil
}

func (c *Console) overview(w http.ResponseWriter, r *http.Request) {
	p, err := c.overviewPage(w, r)
	if err != nil {
		c.failed(w, r, err)
		return
	}
	c.render(w, r, http.StatusOK, "overview.html", p)
}

func (c *Console) overviewLive(w http.ResponseWriter, r *http.Request) {
	p, err := c.overviewPage(w, r)
	if err != nil {
		httpx.WriteProblem(w, http.StatusInternalServerError, "INTERNAL", "The overview could not be read.", err.Error())
		return
	}
	extra := map[string]string{}
	for _, panel := range p.Data.(*overviewData).Panels {
		extra["ov-"+panel.ID] = string(panel.Body)
	}
	c.renderRegionsWith(w, r, "overview.html", p, extra, overviewRegions...)
}

// overviewMaxAge is how long one reading of the overview serves every viewer.
const overviewMaxAge = time.Second

func (c *Console) overviewData(ctx context.Context) (*overviewData, error) {
	c.overviewMu.Lock()
	defer c.overviewMu.Unlock()
	if c.overviewLast != nil && time.Since(c.overviewAt) < overviewMaxAge {
		return c.overviewLast, nil
	}
	d, err := c.readOverview(ctx)
	if err != nil {
		return nil, err
	}
	c.overviewAt, c.overviewLast = time.Now(), d
	return d, nil
}

func (c *Console) readOverview(ctx context.Context) (*overviewData, error) {
	d := &overviewData{SampleInterval: c.sampler.interval}
	samples := c.sampler.samples()
	d.Charts = buildCharts(samples, c.sampler.interval, time.Now())
	for i := len(samples) - 1; i >= 0; i-- {
		if samples[i].Rates {
			d.CommandRate, d.ProcessRate, d.RatesKnown = samples[i].CommandsPerSecond, samples[i].ProcessesPerSecond, true
			break
		}
	}

	depths, err := c.client.QueueDepths(ctx)
	if err != nil {
		return nil, err
	}
	d.Queues = depths
	cfg := c.client.Config()
	loads := map[string]*domainLoad{}
	load := func(domain string) *domainLoad {
		if l, ok := loads[domain]; ok {
			return l
		}
		dc := cfg.Domain(domain)
		l := &domainLoad{Domain: domain, Limit: dc.ConcurrentMessages, ReplyLimit: dc.ReplyConcurrentMessages, Enabled: *dc.Enabled}
		loads[domain] = l
		return l
	}
	for name := range cfg.Domains {
		load(name)
	}
	for _, q := range depths {
		l := load(q.Domain)
		if q.Kind == driver.CommandKindReply {
			l.ReplyRunning += q.Running
		} else {
			l.Running += q.Running
		}
		l.Waiting += q.Ready + q.Scheduled
		l.InTSQ += q.InTSQ
		d.CommandTSQ += q.InTSQ
	}
	for _, l := range loads {
		d.Domains = append(d.Domains, *l)
	}
	sort.Slice(d.Domains, func(i, j int) bool { return d.Domains[i].Domain < d.Domains[j].Domain })

	counts, err := c.client.Driver().Executor().ExecutionCountByStatus(ctx)
	if err != nil {
		return nil, err
	}
	byStatus := map[driver.ExecutionStatus]int64{}
	for _, n := range counts {
		byStatus[n.Status] += n.Count
	}
	for _, s := range []driver.ExecutionStatus{driver.ExecutionPending, driver.ExecutionExecuting, driver.ExecutionWaitingForAsync,
		driver.ExecutionWaitingForRetry, driver.ExecutionWaitingForTSQ, driver.ExecutionCompensating, driver.ExecutionCompleted,
		driver.ExecutionCompensated, driver.ExecutionCancelled, driver.ExecutionFailed} {
		d.Executions = append(d.Executions, statusCount{Status: string(s), Count: byStatus[s]})
	}
	d.ProcessTSQ = byStatus[driver.ExecutionWaitingForTSQ]

	if d.DLQ, err = c.client.DLQ().Depths(ctx); err != nil {
		return nil, err
	}
	for _, q := range d.DLQ {
		d.DLQTotal += q.Count
	}

	for _, ext := range c.hooks {
		more, err := ext.Overview(ctx)
		if err != nil {
			return nil, err
		}
		if more != nil {
			d.Cards = append(d.Cards, more.Cards...)
			d.extPanels = append(d.extPanels, more.Panels...)
		}
	}
	return d, nil
}
