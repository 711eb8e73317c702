package overhead

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/llm-router/llm-router/benchmark/host"
	"github.com/llm-router/llm-router/benchmark/loadgen"
	"github.com/llm-router/llm-router/benchmark/record"
	"github.com/llm-router/llm-router/benchmark/stats"
)

// RatePoint is a fixed open-loop rate with a request body size.
type RatePoint struct {
	Rate  float64 `json:"rate"`
	Bytes int     `json:"body_bytes"`
}

// OpenOptions configure the open-loop overhead benchmark.
type OpenOptions struct {
	BinDir string
	// Points are where the added latency is reported (500 req/s of 1 KB,
	// 100 req/s of 256 KB).
	Points []RatePoint
	// Step is how long each rate is held.
	Step time.Duration
	// Rounds is how many times every configuration is measured at each
	// point, in a rotating order.
	Rounds int
	// Sustain searches the highest sustained rate for each body size,
	// doubling from its start rate, at most MaxSteps steps.
	Sustain  []RatePoint
	MaxSteps int
	// MaxP99 bounds the p99 latency of a sustained rate.
	MaxP99    time.Duration
	Admission bool // also measure the router with admission on
	// Ablate also measures the router (admission off) behind Envoys with
	// one part of the rendered config taken out (see ablations): what
	// each part costs. Measurement only; those configs lose fail-open.
	Ablate     bool
	MaxTokens  int
	ResultsDir string
	Command    string
	Progress   io.Writer
	Log        io.Writer
}

// OpenStep is one configuration at one rate and body size.
type OpenStep struct {
	Config      string        `json:"config"`
	RatePoint                 // offered
	Sent        int           `json:"sent"`
	OK          int           `json:"ok"`
	Failed      int           `json:"failed"`
	P50         float64       `json:"p50_ms"`
	P90         float64       `json:"p90_ms"`
	P99         float64       `json:"p99_ms"`
	Max         float64       `json:"max_ms"`
	Achieved    float64       `json:"achieved_rate"`
	SenderLagMs float64       `json:"sender_lag_ms"`
	Sustained   bool          `json:"sustained"`
	CPU         []host.CPUUse `json:"cpu"`
	MachineBusy float64       `json:"machine_busy_cores"`
}

// AddedLatency is the cost of an ext_proc configuration at one point in
// one round: its latency minus Envoy straight to the GPU's.
type AddedLatency struct {
	RatePoint
	Round    int     `json:"round"`
	Config   string  `json:"config"`
	AddedP50 float64 `json:"added_p50_ms"`
	AddedP99 float64 `json:"added_p99_ms"`
}

// SustainedRate is the highest rate a configuration sustained.
type SustainedRate struct {
	Config string  `json:"config"`
	Bytes  int     `json:"body_bytes"`
	Rate   float64 `json:"rate"` // 0: not even the first
	// Capped is set when the search stopped at its last step still
	// sustaining: the configuration may sustain more.
	Capped bool `json:"capped"`
}

// OpenReport is the open-loop overhead benchmark's outcome.
type OpenReport struct {
	Command    string          `json:"command"`
	Machine    string          `json:"machine"`
	Started    time.Time       `json:"started"`
	Definition string          `json:"sustained_definition"`
	Rounds     int             `json:"rounds"`
	Steps      []OpenStep      `json:"steps"`
	Added      []AddedLatency  `json:"added"`
	Floor      []FloorPoint    `json:"floor"`
	Sustained  []SustainedRate `json:"sustained"`
	Aims       []Aim           `json:"aims"`
}

// Open sends identical non-streamed chat requests at fixed rates
// (open loop: one every 1/rate seconds, whatever the answers do) through
// Envoy straight to an instant gpusim and through Envoy with the router,
// the configurations taking turns at each rate so that machine noise hits
// all alike. It reports the added p50 and p99 at o.Points and the highest
// rate each configuration sustains.
func Open(ctx context.Context, o OpenOptions) (*OpenReport, error) {
	dir, err := os.MkdirTemp("", "llmr-overhead-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	st, err := startOverheadStack(ctx, o.BinDir, dir, o.Admission, o.Ablate)
	if err != nil {
		return nil, err
	}
	defer st.stop()
	rep := &OpenReport{
		Command: o.Command, Machine: host.Machine(), Started: time.Now(),
		Definition: fmt.Sprintf("a rate is sustained when, in one of two tries held for %v each, under 0.1%% of requests fail, the completions keep up (at least 95%% of the offered rate), the sender never falls 100 ms behind its schedule, and the p99 latency stays under %v", o.Step, o.MaxP99),
	}
	clients := make([]*loadgen.Client, len(st.targets))
	for i, t := range st.targets {
		clients[i] = loadgen.NewClient(t.url, 1024, t.key)
		defer clients[i].Close()
		loadgen.RunClosed(ctx, clients[i], 64, 8, func(int) loadgen.Request {
			return loadgen.Request{Model: "bench", MaxTokens: o.MaxTokens, PromptTokens: 200}
		})
	}
	step := func(i int, p RatePoint) (OpenStep, error) {
		s, err := openStep(ctx, clients[i], st, i, p, o)
		if err == nil {
			rep.Steps = append(rep.Steps, s)
			logf(o.Log, "%-36s %7.0f req/s %7d B: p50 %7.3f p99 %8.3f ms, achieved %7.0f req/s, %d failed, machine %.2f cores%s",
				s.Config, p.Rate, p.Bytes, s.P50, s.P99, s.Achieved, s.Failed, s.MachineBusy, sustainedMark(s.Sustained))
		}
		return s, err
	}
	rep.Rounds = max(o.Rounds, 1)
	n := len(st.targets)
	for _, p := range o.Points {
		var rounds [][]OpenStep
		for r := 0; r < rep.Rounds; r++ {
			steps := make([]OpenStep, n)
			for j := 0; j < n; j++ {
				i := (j + r) % n
				if steps[i], err = step(i, p); err != nil {
					return rep, err
				}
			}
			for i := 1; i < n; i++ {
				rep.Added = append(rep.Added, AddedLatency{
					RatePoint: p, Round: r + 1, Config: st.targets[i].name,
					AddedP50: steps[i].P50 - steps[0].P50, AddedP99: steps[i].P99 - steps[0].P99,
				})
			}
			rounds = append(rounds, steps)
		}
		rep.Floor = append(rep.Floor, floorPoints(p, st.targets, rounds)...)
	}
	for _, sp := range o.Sustain {
		if o.MaxSteps < 1 {
			break
		}
		best := make([]SustainedRate, len(st.targets))
		alive := make([]bool, len(st.targets))
		for i, t := range st.targets {
			best[i] = SustainedRate{Config: t.name, Bytes: sp.Bytes}
			alive[i] = true
		}
		rate := sp.Rate
		for k := 0; k < o.MaxSteps && slices.Contains(alive, true); k++ {
			for i := range st.targets {
				if !alive[i] {
					continue
				}
				s, err := step(i, RatePoint{Rate: rate, Bytes: sp.Bytes})
				if err == nil && !s.Sustained {
					// One retry: a noise burst from outside the benchmark
					// should not end the search.
					s, err = step(i, RatePoint{Rate: rate, Bytes: sp.Bytes})
				}
				if err != nil {
					return rep, err
				}
				if !s.Sustained {
					alive[i] = false
					continue
				}
				best[i].Rate = rate
				best[i].Capped = k == o.MaxSteps-1
			}
			rate *= 2
		}
		rep.Sustained = append(rep.Sustained, best...)
	}
	rep.Aims = aims(rep)
	if o.ResultsDir != "" {
		if err := writeOpen(o.ResultsDir, rep); err != nil {
			return rep, err
		}
	}
	return rep, nil
}

func sustainedMark(ok bool) string {
	if ok {
		return ""
	}
	return "  NOT SUSTAINED"
}

// openStep holds one rate against target i.
func openStep(ctx context.Context, c *loadgen.Client, st *overheadStack, i int, p RatePoint, o OpenOptions) (OpenStep, error) {
	t := st.targets[i]
	req := loadgen.SizedRequest(p.Bytes, o.MaxTokens)
	n := max(int(p.Rate*o.Step.Seconds()), 1)
	gap := time.Duration(float64(time.Second) / p.Rate)
	pids := map[string]int{"gpusim": st.gpuPid}
	for k, v := range t.pids {
		pids[k] = v
	}
	meter, machine := host.NewCPUMeter(pids), host.NewMachineMeter()
	meter.Start()
	machine.Start()
	prog := loadgen.NewProgress(o.Progress, fmt.Sprintf("%s %.0f/s %dB", t.name, p.Rate, p.Bytes), n)
	results := make([]loadgen.Result, n)
	var wg sync.WaitGroup
	epoch := time.Now()
	var lag time.Duration
	timer := time.NewTimer(time.Hour)
	for k := 0; k < n && ctx.Err() == nil; k++ {
		due := epoch.Add(time.Duration(k) * gap)
		if d := time.Until(due); d > 0 {
			timer.Reset(d)
			<-timer.C
		}
		lag = max(lag, time.Since(due))
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[k] = c.Do(ctx, req, epoch)
			prog.Add(1)
		}()
	}
	timer.Stop()
	wg.Wait()
	prog.Finish()
	elapsed := time.Since(epoch)
	cpu, _ := meter.Stop()
	busy := machine.Stop()
	if ctx.Err() != nil {
		return OpenStep{}, ctx.Err()
	}
	lat := stats.Latencies(results)
	s := OpenStep{
		Config: t.name, RatePoint: p, Sent: n, OK: len(lat), Failed: n - len(lat),
		P50: stats.Ms(stats.Percentile(lat, 50)), P90: stats.Ms(stats.Percentile(lat, 90)), P99: stats.Ms(stats.Percentile(lat, 99)), Max: stats.Ms(stats.Percentile(lat, 100)),
		Achieved: float64(len(lat)) / elapsed.Seconds(), SenderLagMs: stats.Ms(lag), CPU: cpu, MachineBusy: busy * float64(runtime.NumCPU()),
	}
	s.Sustained = float64(s.Failed) <= 0.001*float64(n) && s.Achieved >= 0.95*p.Rate &&
		lag < 100*time.Millisecond && s.P99 <= stats.Ms(o.MaxP99)
	return s, nil
}

// writeOpen writes overhead.json and overhead.md into a run folder
// and publishes them to latest/.
func writeOpen(results string, rep *OpenReport) error {
	dir, err := record.Folder(results, "overhead", rep.Started)
	if err != nil {
		return err
	}
	if err := record.WriteJSON(filepath.Join(dir, "overhead.json"), rep); err != nil {
		return err
	}
	if err := record.WriteFile(filepath.Join(dir, "overhead.md"), func(w io.Writer) error { rep.Markdown(w); return nil }); err != nil {
		return err
	}
	return record.Publish(results, dir, []string{"overhead.json", "overhead.md"})
}

// Markdown writes the open-loop overhead report.
func (r *OpenReport) Markdown(w io.Writer) {
	fmt.Fprintf(w, "# llm-router benchmark: overhead\n\n- **Command**: `%s`\n- **Machine**: %s\n- **Started**: %s\n",
		r.Command, r.Machine, r.Started.UTC().Format(time.RFC3339))
	fmt.Fprintf(w, "- Identical non-streamed chat requests at fixed rates (open loop) to one gpusim that answers instantly; Envoy straight to it, Envoy asking a no-op ext_proc server (the router's rendered config, every phase answered at once: the floor) and Envoy asking llm-router; the configurations take turns at each rate.\n\n")
	r.markdownFloor(w)
	fmt.Fprintf(w, "\n## Highest sustained rate on the host\n\nDefinition: %s. Rates double from the first; the client, Envoy, the router and gpusim share the machine's cores, so this is the host's figure, not the router's alone.\n\n", r.Definition)
	fmt.Fprintln(w, "| configuration | body | sustained req/s |\n|---|---|---|")
	for _, s := range r.Sustained {
		v := fmt.Sprintf("%.0f", s.Rate)
		if s.Capped {
			v = "≥ " + v + " (search limit)"
		}
		fmt.Fprintf(w, "| %s | %s | %s |\n", s.Config, sizeWord(s.Bytes), v)
	}
	fmt.Fprintln(w, "\n## Every step\n\n| configuration | rate | body | ok | failed | p50 ms | p90 ms | p99 ms | max ms | achieved req/s | sender lag ms | machine cores | sustained |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, s := range r.Steps {
		fmt.Fprintf(w, "| %s | %.0f | %s | %d | %d | %.3f | %.3f | %.3f | %.3f | %.0f | %.1f | %.2f | %s |\n",
			s.Config, s.Rate, sizeWord(s.Bytes), s.OK, s.Failed, s.P50, s.P90, s.P99, s.Max, s.Achieved, s.SenderLagMs, s.MachineBusy, yesNo(s.Sustained))
	}
}

func sizeWord(b int) string {
	if b >= 1024 && b%1024 == 0 {
		return fmt.Sprintf("%d KB", b/1024)
	}
	return fmt.Sprintf("%d B", b)
}
