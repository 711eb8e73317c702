package loadgen

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// OpenOptions shape an open-loop run.
type OpenOptions struct {
	// Scale multiplies every arrival time (the fleet's slowdown).
	Scale float64
	// Jobs [From, To) are the measured ones. Once the last job is sent, the
	// run waits for them only, at most Grace (wall time), then cancels
	// every request still open: jobs outside the window exist to keep the
	// load steady around the measured ones, not to be waited for.
	From, To int
	Grace    time.Duration
	// FirstTokenOnly counts a measured job done at its first token: for
	// runs that only read TTFT (the capacity probes).
	FirstTokenOnly bool
	// Request turns a job into its request; nil: Job.Request with no
	// nonce and no prefix blocks.
	Request func(Job) Request
}

// RunOpen sends every job at its arrival time whatever happened to the
// earlier ones: an open loop, as real users arrive. Jobs are streamed chat
// requests with max_tokens set to the job's output length. Results are in
// wall time, in job order; a request cancelled at the end has Cut set. lag
// is how late the sender was at the worst moment: if it grows, the load
// generator itself was starved of CPU and the loop was not open.
func RunOpen(ctx context.Context, c *Client, jobs []Job, o OpenOptions, prog *Progress) (results []Result, lag time.Duration) {
	if o.Scale <= 0 {
		o.Scale = 1
	}
	if o.To <= o.From || o.To > len(jobs) {
		o.From, o.To = 0, len(jobs)
	}
	results = make([]Result, len(jobs))
	reqCtx, cut := context.WithCancel(ctx)
	defer cut()
	var all, measuredWG sync.WaitGroup
	measuredWG.Add(o.To - o.From)
	epoch := time.Now()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	sent := len(jobs)
	for i, j := range jobs {
		due := epoch.Add(time.Duration(float64(j.At) * o.Scale))
		if d := time.Until(due); d > 0 {
			timer.Reset(d)
			select {
			case <-ctx.Done():
			case <-timer.C:
			}
		}
		if ctx.Err() != nil {
			sent = i
			break
		}
		lag = max(lag, time.Since(due))
		all.Add(1)
		go func() {
			defer all.Done()
			var once sync.Once
			done := func() {
				if i >= o.From && i < o.To {
					once.Do(measuredWG.Done)
				}
			}
			var req Request
			if o.Request != nil {
				req = o.Request(j)
			} else {
				req = Request{Model: Model, MaxTokens: j.Output, PromptTokens: j.Prompt, Stream: true}
			}
			if o.FirstTokenOnly {
				req.onFirstToken = done
			}
			r := c.Do(reqCtx, req, epoch)
			if reqCtx.Err() != nil && !r.OK() {
				r.Cut = true
			}
			results[i] = r
			prog.Add(1)
			done()
		}()
	}
	for k := sent; k < len(jobs); k++ {
		results[k] = Result{Start: time.Duration(float64(jobs[k].At) * o.Scale), Err: "not sent", Cut: true}
		if k >= o.From && k < o.To {
			measuredWG.Done()
		}
	}
	waited := make(chan struct{})
	go func() {
		measuredWG.Wait()
		close(waited)
	}()
	grace := time.NewTimer(max(o.Grace, time.Millisecond))
	defer grace.Stop()
	select {
	case <-waited:
	case <-grace.C:
	case <-ctx.Done():
	}
	cut()
	all.Wait()
	return results, lag
}

// ScaleResults divides every duration of rs by scale, turning wall time
// into the GPU time of a fleet slowed down by scale.
func ScaleResults(rs []Result, scale float64) []Result {
	if scale == 1 {
		return rs
	}
	f := func(d time.Duration) time.Duration { return time.Duration(float64(d) / scale) }
	out := make([]Result, len(rs))
	for i, r := range rs {
		r.Start, r.Latency, r.TTFT, r.ITLMax = f(r.Start), f(r.Latency), f(r.TTFT), f(r.ITLMax)
		if r.ITLs != nil {
			itls := make([]time.Duration, len(r.ITLs))
			for k, d := range r.ITLs {
				itls[k] = f(d)
			}
			r.ITLs = itls
		}
		out[i] = r
	}
	return out
}

// Progress is a one-line progress bar redrawn on a terminal stream
// (stderr) a few times a second; on anything else (a log file, CI) it
// writes only its final line. A nil *Progress does nothing.
type Progress struct {
	w     io.Writer
	label string
	total int64
	done  atomic.Int64
	start time.Time
	stop  chan struct{}
	wg    sync.WaitGroup
	live  bool
}

// NewProgress starts a bar of total steps on w; nil w gives a nil bar.
func NewProgress(w io.Writer, label string, total int) *Progress {
	if w == nil {
		return nil
	}
	p := &Progress{w: w, label: label, total: int64(total), start: time.Now(), stop: make(chan struct{}), live: isTerminal(w)}
	if !p.live {
		return p
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-p.stop:
				return
			case <-t.C:
				p.draw()
			}
		}
	}()
	return p
}

// Add counts n more steps done.
func (p *Progress) Add(n int) {
	if p != nil {
		p.done.Add(int64(n))
	}
}

// Finish draws the final state and ends the line.
func (p *Progress) Finish() {
	if p == nil {
		return
	}
	close(p.stop)
	p.wg.Wait()
	p.draw()
	fmt.Fprintln(p.w)
}

func (p *Progress) draw() {
	prefix := ""
	if p.live {
		prefix = "\r"
	}
	fmt.Fprint(p.w, prefix+progressLine(p.label, p.done.Load(), p.total, time.Since(p.start)))
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// progressLine renders "label [#####.....] done/total elapsed".
func progressLine(label string, done, total int64, elapsed time.Duration) string {
	const width = 30
	filled := 0
	if total > 0 {
		filled = int(min(done, total) * width / total)
	}
	return fmt.Sprintf("%-40s [%s%s] %d/%d %s ", label, strings.Repeat("#", filled), strings.Repeat(".", width-filled),
		done, total, elapsed.Round(time.Second))
}
