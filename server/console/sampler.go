package console

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/commandbus/commandbus"
	"github.com/commandbus/commandbus/driver"
)

// defaultSampleInterval is how often the console samples when Config.ConsoleSampleInterval is
// unset.
const defaultSampleInterval = 5 * time.Second

// sample is one point of the overview's charts.
type sample struct {
	At time.Time
	// CommandsPerSecond is the rate of commands handled successfully since the previous sample.
	CommandsPerSecond float64
	// ProcessesPerSecond is the rate of executions that completed since the previous sample.
	ProcessesPerSecond float64
	// QueueDepth counts commands and replies waiting on their queues (ready or scheduled).
	QueueDepth float64
	// TSQ counts commands and executions waiting in the troubleshooting queues.
	TSQ float64
	// Rates reports whether the rates are known (the first sample has nothing to compare with).
	Rates bool
}

// sampler keeps the last 15 minutes of samples in a ring buffer, sampled on a ticker from the
// moment the server starts until Close.
type sampler struct {
	client   *commandbus.Client
	gatherer prometheus.Gatherer
	interval time.Duration
	logger   *slog.Logger

	mu       sync.Mutex
	ring     []sample
	next     int
	filled   bool
	prev     counters
	havePrev bool

	startOnce, stopOnce sync.Once
	cancel              context.CancelFunc
	done                chan struct{}
}

// counters are the monotonic totals rates are derived from.
type counters struct {
	at        time.Time
	commands  float64
	processes float64
}

func newSampler(client *commandbus.Client, gatherer prometheus.Gatherer, interval time.Duration, logger *slog.Logger) *sampler {
	if interval <= 0 {
		interval = defaultSampleInterval
	}
	size := int(consoleWindow/interval) + 1
	return &sampler{client: client, gatherer: gatherer, interval: interval, logger: logger,
		ring: make([]sample, size), done: make(chan struct{})}
}

func (s *sampler) start() {
	s.startOnce.Do(func() {
		ctx, cancel := context.WithCancel(context.Background())
		s.cancel = cancel
		go s.run(ctx)
	})
}

// stop ends the sampling goroutine and waits for it.
func (s *sampler) stop() {
	s.stopOnce.Do(func() {
		if s.cancel == nil {
			close(s.done)
			return
		}
		s.cancel()
		<-s.done
	})
}

func (s *sampler) run(ctx context.Context) {
	defer close(s.done)
	s.sampleOnce(ctx)
	ticker := time.NewTicker(s.interval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
			s.sampleOnce(ctx)
		}
	}
}

func (s *sampler) sampleOnce(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, s.interval)
	defer cancel()
	smp, cur, err := s.collect(ctx)
	if err != nil {
		if ctx.Err() == nil {
			s.logger.Warn("console: sampling failed; the charts show a gap", "error", err)
		}
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.havePrev {
		if dt := cur.at.Sub(s.prev.at).Seconds(); dt > 0 {
			smp.CommandsPerSecond = max(cur.commands-s.prev.commands, 0) / dt
			smp.ProcessesPerSecond = max(cur.processes-s.prev.processes, 0) / dt
			smp.Rates = true
		}
	}
	s.prev, s.havePrev = cur, true
	s.ring[s.next] = smp
	s.next = (s.next + 1) % len(s.ring)
	s.filled = s.filled || s.next == 0
}

// collect reads the queue depths, the execution counts and the command counter.
func (s *sampler) collect(ctx context.Context) (sample, counters, error) {
	now := time.Now()
	smp := sample{At: now}
	depths, err := s.client.QueueDepths(ctx)
	if err != nil {
		return smp, counters{}, err
	}
	for _, d := range depths {
		smp.QueueDepth += float64(d.Ready + d.Scheduled)
		smp.TSQ += float64(d.InTSQ)
	}
	counts, err := s.client.Driver().Executor().ExecutionCountByStatus(ctx)
	if err != nil {
		return smp, counters{}, err
	}
	cur := counters{at: now}
	for _, c := range counts {
		switch c.Status {
		case driver.ExecutionCompleted:
			cur.processes += float64(c.Count)
		case driver.ExecutionWaitingForTSQ:
			smp.TSQ += float64(c.Count)
		}
	}
	if cur.commands, err = s.commandsHandled(ctx); err != nil {
		return smp, counters{}, err
	}
	return smp, cur, nil
}

// commandsHandled is the number of commands handled successfully so far. It reads the client's
// Prometheus counter when the server's Gatherer has it (the client registered its metrics
// there); otherwise it counts the completed commands in the database, which is slower.
func (s *sampler) commandsHandled(ctx context.Context) (float64, error) {
	if s.gatherer != nil {
		if families, err := s.gatherer.Gather(); err == nil {
			for _, f := range families {
				if f.GetName() != "commandbus_commands_handled_total" {
					continue
				}
				total := 0.0
				for _, m := range f.GetMetric() {
					kind, result := "", ""
					for _, l := range m.GetLabel() {
						switch l.GetName() {
						case "kind":
							kind = l.GetValue()
						case "result":
							result = l.GetValue()
						}
					}
					if kind == string(driver.CommandKindCommand) && result == "success" {
						total += m.GetCounter().GetValue()
					}
				}
				return total, nil
			}
		}
	}
	// No counter: commands created in the window that completed. Older completions fall out of
	// the window, so the total can shrink; rates clamp at zero.
	stats, err := s.client.CommandStats(ctx, consoleWindow)
	if err != nil {
		return 0, err
	}
	total := 0.0
	for _, st := range stats {
		total += float64(st.Counts[driver.CommandStatusCompleted])
	}
	return total, nil
}

// samples returns the buffered samples, oldest first.
func (s *sampler) samples() []sample {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []sample
	if s.filled {
		out = append(out, s.ring[s.next:]...)
	}
	out = append(out, s.ring[:s.next]...)
	cutoff := time.Now().Add(-consoleWindow)
	for len(out) > 0 && out[0].At.Before(cutoff) {
		out = out[1:]
	}
	return out
}
