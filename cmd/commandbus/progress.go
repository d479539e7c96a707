package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// progressBar draws a one-line progress bar, redrawn in place on a terminal and printed every
// few seconds otherwise (CI logs).
type progressBar struct {
	out      io.Writer
	tty      bool
	total    int
	start    time.Time
	lastLine time.Time
}

func newProgressBar(out io.Writer, total int) *progressBar {
	tty := false
	if f, ok := out.(*os.File); ok {
		if info, err := f.Stat(); err == nil {
			tty = info.Mode()&os.ModeCharDevice != 0
		}
	}
	return &progressBar{out: out, tty: tty, total: total, start: time.Now()}
}

// update shows done of total plus a short status.
func (p *progressBar) update(done int, status string) {
	if !p.tty && time.Since(p.lastLine) < 2*time.Second && done < p.total {
		return
	}
	p.lastLine = time.Now()
	const width = 30
	filled := 0
	if p.total > 0 {
		filled = min(width, done*width/p.total)
	}
	line := fmt.Sprintf("[%s%s] %d/%d  %5.1fs  %s", strings.Repeat("#", filled), strings.Repeat(".", width-filled),
		done, p.total, time.Since(p.start).Seconds(), status)
	if p.tty {
		fmt.Fprintf(p.out, "\r%-110s", line)
	} else {
		fmt.Fprintln(p.out, line)
	}
}

// finish ends the bar's line.
func (p *progressBar) finish() {
	if p.tty {
		fmt.Fprintln(p.out)
	}
}
