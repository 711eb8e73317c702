package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Result is one scenario's outcome.
type Result struct {
	Scenario string `json:"scenario"`
	Fault    string `json:"fault"`
	Sent     int    `json:"sent"`
	Failed   int    `json:"failed"` // non-200, transport errors, cut streams, lost
	Lost     int    `json:"lost"`   // no answer within the client timeout
	Cut      int    `json:"cut_streams"`
	FailOpen int    `json:"fail_open"` // served by Envoy alone, routed by model
	// FailedAfterRecovery counts failures of requests sent after the
	// system noticed the fault (kill-one-router).
	FailedAfterRecovery int `json:"failed_after_recovery"`
	// RecoveryMS is the recovery time in milliseconds (-1: never); Recovery
	// says what it measures.
	RecoveryMS float64 `json:"recovery_ms"`
	Recovery   string  `json:"recovery"`
	// DetectMS: from the fault until the system noticed it (-1: never).
	DetectMS float64 `json:"detect_ms"`
	// CountsZeroMS: after the load stopped, until every in-flight and queue
	// count in the shared state read 0 (-1: never, within the wait).
	CountsZeroMS float64  `json:"counts_zero_ms"`
	Share        *Share   `json:"share,omitempty"`
	Checks       []Check  `json:"checks"`
	Notes        []string `json:"notes,omitempty"`
	Pass         bool     `json:"pass"`
	Error        string   `json:"error,omitempty"`
}

// Share is the slow worker's share of its model's requests.
type Share struct {
	Before float64 `json:"before"`
	After  float64 `json:"after"`
}

// Check is one pass/fail criterion of a scenario.
type Check struct {
	Name   string `json:"name"`
	Pass   bool   `json:"pass"`
	Detail string `json:"detail,omitempty"`
}

func (r *Result) check(name string, pass bool, detail string) {
	r.Checks = append(r.Checks, Check{Name: name, Pass: pass, Detail: detail})
}

// RunOptions configure a chaos run.
type RunOptions struct {
	Options
	// Steady is how long the load runs after each step of a scenario
	// (default 3s); the warm-up before the fault is 1.5s.
	Steady time.Duration
	// Clients and Gap shape the steady load: Clients concurrent clients,
	// each pausing Gap between requests (defaults 8 and 10ms).
	Clients int
	Gap     time.Duration
	Logf    func(format string, args ...any)
}

// Run runs the named scenarios (all when names is empty), each on a fresh
// stack, and returns their results. An error means a scenario could not be
// run at all; a scenario that ran and failed its checks has Pass false.
func Run(ctx context.Context, o RunOptions, names ...string) ([]Result, error) {
	if o.Steady <= 0 {
		o.Steady = 3 * time.Second
	}
	if o.Clients <= 0 {
		o.Clients = 8
	}
	if o.Gap <= 0 {
		o.Gap = 10 * time.Millisecond
	}
	if o.Replicas <= 0 {
		o.Replicas = 3
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	for _, n := range names {
		if !slices.Contains(scenarioNames(), n) {
			return nil, fmt.Errorf("unknown scenario %q (have %s)", n, strings.Join(scenarioNames(), ", "))
		}
	}
	var run []Scenario
	for _, sc := range Scenarios() {
		if len(names) == 0 || slices.Contains(names, sc.Name) {
			run = append(run, sc)
		}
	}
	var results []Result
	for _, sc := range run {
		o.Logf("chaos: %s: %s", sc.Name, sc.Fault)
		r, err := runOne(ctx, o, sc)
		if err != nil {
			return results, fmt.Errorf("%s: %w", sc.Name, err)
		}
		o.Logf("chaos: %s: sent %d failed %d lost %d recovery %.0fms pass %v", r.Scenario, r.Sent, r.Failed, r.Lost, r.RecoveryMS, r.Pass)
		results = append(results, r)
	}
	return results, nil
}

func runOne(ctx context.Context, o RunOptions, sc Scenario) (Result, error) {
	so := o.Options
	if sc.redis != "" {
		so.Redis = sc.redis
	}
	s, err := Start(ctx, so)
	if err != nil {
		return Result{}, err
	}
	defer s.Stop()
	t := &timeline{seen: map[string]bool{}, steady: o.Steady}
	l := startLoad(ctx, s.URL, o.Clients, o.Gap)
	sleep(ctx, 1500*time.Millisecond) // the warm-up: the judges' baseline window
	injectErr := sc.inject(ctx, s, l, t)
	out := l.finish()
	r := Result{Scenario: sc.Name, Fault: sc.Fault, Recovery: sc.Recovery, Sent: len(out), RecoveryMS: -1, DetectMS: -1}
	if injectErr != nil {
		r.Error = injectErr.Error()
	}
	for _, oc := range out {
		if !oc.ok() {
			r.Failed++
		}
		if oc.lost {
			r.Lost++
		}
		if oc.cut {
			r.Cut++
		}
	}
	sc.judge(&r, out, t)
	// Whatever dies, internal headers never reach a client and every
	// answer a worker gave names that worker (x-routed-node).
	leaked, unnamed := 0, 0
	for _, oc := range out {
		if oc.leaked {
			leaked++
		}
		if oc.served != "" && oc.node != oc.served {
			unnamed++
		}
	}
	r.check("no internal header reaches a client", leaked == 0, fmt.Sprintf("%d of %d", leaked, len(out)))
	r.check("x-routed-node names the worker that served", unnamed == 0, fmt.Sprintf("%d of %d do not", unnamed, len(out)))
	if !t.detected.IsZero() {
		r.DetectMS = msf(t.detected.Sub(t.fault))
	}
	if !t.recovered.IsZero() {
		from := t.recoverAt
		if from.IsZero() {
			from = t.fault
		}
		r.RecoveryMS = msf(t.recovered.Sub(from))
	}
	// Every in-flight and queue count returns to 0: claims of killed
	// replicas lapse with their lease, the others are released.
	stopped := time.Now()
	zero := pollUntil(ctx, s.cfgs[0].ClaimLease.D()+10*time.Second, func() bool {
		inflight, queued, err := s.Counts(ctx)
		return err == nil && inflight == 0 && queued == 0
	})
	r.CountsZeroMS = -1
	if !zero.IsZero() {
		r.CountsZeroMS = msf(zero.Sub(stopped))
	}
	inflight, queued, _ := s.Counts(ctx)
	r.check("in-flight and queue counts return to 0", !zero.IsZero(), fmt.Sprintf("in-flight %d, queued %d", inflight, queued))
	if sc.exactCounts {
		lease := s.cfgs[0].ClaimLease.D()
		r.check("no claim leaked or double counted (counts 0 before a lease could lapse)",
			!zero.IsZero() && zero.Sub(stopped) < lease, fmt.Sprintf("%.0f ms, lease %s", r.CountsZeroMS, lease))
	}
	r.Notes = append(t.notes, r.Notes...)
	r.Pass = r.Error == ""
	for _, c := range r.Checks {
		r.Pass = r.Pass && c.Pass
	}
	return r, nil
}

func msf(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func scenarioNames() []string {
	var out []string
	for _, sc := range Scenarios() {
		out = append(out, sc.Name)
	}
	return out
}

// WriteReport writes results.json and results.md into dir.
func WriteReport(dir, command string, results []Result) error {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return err
	}
	b, err := json.MarshalIndent(struct {
		Command string    `json:"command"`
		At      time.Time `json:"at"`
		Results []Result  `json:"results"`
	}{command, time.Now().UTC().Round(time.Second), results}, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "results.json"), append(b, '\n'), 0o600); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "results.md"), []byte(Markdown(command, results)), 0o600)
}

// Markdown renders the results as the table in docs/production.md.
func Markdown(command string, results []Result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "`%s`\n\n", command)
	b.WriteString("| Scenario | Fault | Sent | Failed | Lost | Recovery | Counts → 0 | Result |\n")
	b.WriteString("|---|---|--:|--:|--:|---|--:|---|\n")
	for _, r := range results {
		rec := "never"
		if r.RecoveryMS >= 0 {
			rec = fmt.Sprintf("%.0f ms (%s)", r.RecoveryMS, r.Recovery)
		}
		zero := "never"
		if r.CountsZeroMS >= 0 {
			zero = fmt.Sprintf("%.0f ms", r.CountsZeroMS)
		}
		verdict := "pass"
		if !r.Pass {
			var failed []string
			for _, c := range r.Checks {
				if !c.Pass {
					failed = append(failed, c.Name+" ("+c.Detail+")")
				}
			}
			if r.Error != "" {
				failed = append(failed, r.Error)
			}
			verdict = "**FAIL**: " + strings.Join(failed, "; ")
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %d | %d | %s | %s | %s |\n", r.Scenario, r.Fault, r.Sent, r.Failed, r.Lost, rec, zero, verdict)
	}
	b.WriteString("\nChecks and notes per scenario:\n\n")
	for _, r := range results {
		fmt.Fprintf(&b, "- **%s**:", r.Scenario)
		var parts []string
		for _, c := range r.Checks {
			mark := "ok"
			if !c.Pass {
				mark = "FAILED"
			}
			p := c.Name + ": " + mark
			if c.Detail != "" {
				p += " (" + c.Detail + ")"
			}
			parts = append(parts, p)
		}
		if r.Cut > 0 {
			parts = append(parts, fmt.Sprintf("%d streams cut", r.Cut))
		}
		if r.FailOpen > 0 {
			parts = append(parts, fmt.Sprintf("%d served fail-open", r.FailOpen))
		}
		if r.DetectMS >= 0 {
			parts = append(parts, fmt.Sprintf("fault noticed after %.0f ms", r.DetectMS))
		}
		parts = append(parts, r.Notes...)
		b.WriteString(" " + strings.Join(parts, "; ") + ".\n")
	}
	return b.String()
}
