// Package cli implements the operator commands of llm-router that talk to a
// running router's admin port (--admin URL): the fleet commands through the
// native API's generated gRPC client, explain through /decisions/{id} (the
// record as the scheduler logs it). Each prints a readable table by default
// and JSON with -o json, and names what went wrong when it fails
// (connection refused, unknown worker, unauthorised).
package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/llm-router/llm-router/scheduler"
	"github.com/llm-router/llm-router/scoring"
)

// Client talks to one router's admin endpoint.
type Client struct {
	Base  string // e.g. http://127.0.0.1:9090
	Token string // admin credential, sent as a Bearer token when set
	HTTP  *http.Client
}

// ErrNotFound: the router knows no such thing (request id, worker).
var ErrNotFound = errors.New("not found")

// ErrUnauthorised: the admin credential is missing or wrong.
var ErrUnauthorised = errors.New("unauthorised: pass the admin token with --token or LLM_ROUTER_ADMIN_TOKEN")

// do sends a request and decodes a JSON answer into out, turning transport
// and HTTP failures into messages that say what went wrong.
func (c *Client) do(ctx context.Context, method, path string, body io.Reader, out any) error {
	hc := c.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(c.Base, "/")+path, body)
	if err != nil {
		return fmt.Errorf("bad --admin URL %q: %w", c.Base, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		if errors.Is(err, syscall.ECONNREFUSED) {
			return fmt.Errorf("connection refused: no router admin listening at %s", c.Base)
		}
		var ue *url.Error
		if errors.As(err, &ue) && ue.Timeout() {
			return fmt.Errorf("timed out talking to %s", c.Base)
		}
		return fmt.Errorf("talk to %s: %w", c.Base, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 32<<20))
	if err != nil {
		return fmt.Errorf("read answer from %s: %w", c.Base, err)
	}
	if resp.StatusCode >= 300 {
		var e struct {
			Error   struct{ Code, Message string }
			Message string
		}
		_ = json.Unmarshal(raw, &e)
		msg := e.Error.Message
		if msg == "" {
			msg = e.Message
		}
		if msg == "" {
			msg = strings.TrimSpace(string(raw))
		}
		switch resp.StatusCode {
		case http.StatusNotFound:
			return fmt.Errorf("%w: %s", ErrNotFound, msg)
		case http.StatusUnauthorized, http.StatusForbidden:
			return ErrUnauthorised
		}
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, msg)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("decode answer from %s: %w", c.Base, err)
	}
	return nil
}

// Explain fetches the decision for a request id.
func (c *Client) Explain(ctx context.Context, requestID string) (*scheduler.Decision, error) {
	var d scheduler.Decision
	if err := c.do(ctx, http.MethodGet, "/decisions/"+url.PathEscape(requestID), nil, &d); err != nil {
		if errors.Is(err, ErrNotFound) {
			return nil, fmt.Errorf("no decision recorded for request %q (it may be older than the decision log keeps): %w", requestID, ErrNotFound)
		}
		return nil, err
	}
	return &d, nil
}

// PrintDecision writes a decision as a readable report: what was asked,
// what was decided, the wait, how it went, and every candidate's terms.
func PrintDecision(w io.Writer, d *scheduler.Decision) {
	fmt.Fprintf(w, "request   %s  (decided %s by replica %s)\n", d.RequestID, d.Time.Format(time.RFC3339Nano), d.Replica)
	fmt.Fprintf(w, "asked     model %s, priority %s", d.Model, d.Priority)
	if d.Tenant != "" {
		fmt.Fprintf(w, ", tenant %s", d.Tenant)
	}
	fmt.Fprintf(w, ", max_tokens %d, ~%d prompt tokens, stream %v\n", d.MaxTokens, d.PromptTokens, d.Stream)
	if d.SLO != (scheduler.SLO{}) {
		use := "recorded, not used to place"
		if d.Strategy == scoring.Predicted {
			use = "enforced in the claim"
		}
		fmt.Fprintf(w, "slo       ttft %s (%s), tpot %s (%s); %s\n",
			d.SLO.TTFT.Duration().Round(time.Microsecond), sloSource(d.SLO.TTFT.Source),
			d.SLO.TPOT.Duration().Round(time.Microsecond), sloSource(d.SLO.TPOT.Source), use)
	}
	if p := d.Prediction; p != nil {
		printPrediction(w, d.Outcome, p)
	}
	printAdapter(w, d)
	fmt.Fprintf(w, "decided   %s with %s", d.Outcome, d.Strategy)
	if d.Fallback != "" {
		fmt.Fprintf(w, " (fell back to %s: no worker had data)", d.Fallback)
	}
	if d.Worker != "" {
		fmt.Fprintf(w, " -> %s", d.Worker)
	}
	if d.DecideMicros > 0 {
		fmt.Fprintf(w, " in %s", time.Duration(d.DecideMicros*float64(time.Microsecond)).Round(time.Microsecond))
	}
	fmt.Fprintf(w, ", on a snapshot %s old\n", time.Duration(d.SnapshotAge*float64(time.Second)).Round(time.Millisecond))
	printDisaggregation(w, d.Disaggregation)
	if d.WaitSeconds > 0 {
		fmt.Fprintf(w, "waited    %s in the queue", time.Duration(d.WaitSeconds*float64(time.Second)).Round(time.Millisecond))
		if d.QueuePosition > 0 {
			fmt.Fprintf(w, " (joined at position %d)", d.QueuePosition)
		}
		fmt.Fprintln(w)
	}
	if r := d.Result; r != nil {
		fmt.Fprintf(w, "result    HTTP %d", r.Status)
		if r.ServedBy != "" { // none when the router answered itself (429, 503)
			fmt.Fprintf(w, " from %s", r.ServedBy)
		}
		fmt.Fprintf(w, " in %s", time.Duration(r.LatencySeconds*float64(time.Second)).Round(time.Millisecond))
		if r.TTFTSeconds > 0 {
			fmt.Fprintf(w, ", first token after %s, %.1f tokens/s, %d tokens",
				time.Duration(r.TTFTSeconds*float64(time.Second)).Round(time.Millisecond), r.TokensPerSecond, r.CompletionTokens)
		}
		if r.TPOTSeconds > 0 {
			fmt.Fprintf(w, ", %s a token after it", seconds(r.TPOTSeconds))
		}
		if r.TTFTError > 0 || r.TPOTError > 0 {
			fmt.Fprintf(w, " (predictions off by %.0f%% and %.0f%%)", 100*r.TTFTError, 100*r.TPOTError)
		}
		if r.Aborted {
			fmt.Fprint(w, " (the client left)")
		}
		if r.ServedBy != d.Worker && d.Worker != "" && r.ServedBy != "" {
			fmt.Fprintf(w, "; Envoy retried it away from %s", d.Worker)
		}
		fmt.Fprintln(w)
	} else if d.Outcome == scheduler.OutcomeClaimed {
		fmt.Fprintln(w, "result    still running")
	}
	if d.Conflict {
		fmt.Fprintln(w, "note      live counts changed the choice the cached snapshot would have made (the atomic claim at work)")
	}
	if len(d.Unknown) > 0 {
		why := "no fresh signal: counted as 0"
		if d.Strategy == scoring.Predicted {
			why = "too little history: the prior's figures"
		}
		fmt.Fprintf(w, "unknown   %s (%s, see ? below)\n", strings.Join(d.Unknown, ", "), why)
	}
	if len(d.Candidates) == 0 {
		fmt.Fprintln(w, "\nno candidates")
	} else {
		fmt.Fprintln(w)
		printCandidates(w, d)
	}
	for _, e := range d.Excluded {
		fmt.Fprintf(w, "excluded  %s: %s\n", e.Worker, e.Reason)
	}
}

// printPrediction writes the latency model's prediction for the pick, or
// for a request refused for its objective the best idle TTFT.
func printPrediction(w io.Writer, outcome string, p *scheduler.Prediction) {
	if outcome == scheduler.OutcomeObjectiveUnmet {
		if p.TTFTSeconds > 0 {
			fmt.Fprintf(w, "predicted ttft %s at best, on an idle worker\n", seconds(p.TTFTSeconds))
		}
		return
	}
	unknown := func(u bool) string {
		if u {
			return " (unknown: mostly the prior)"
		}
		return ""
	}
	fmt.Fprintf(w, "predicted ttft %s%s, tpot %s%s", seconds(p.TTFTSeconds), unknown(p.TTFTUnknown), seconds(p.TPOTSeconds), unknown(p.TPOTUnknown))
	if p.CeilingSeconds > 0 {
		fmt.Fprintf(w, "; live ttft terms bounded by %s", seconds(p.CeilingSeconds))
	}
	fmt.Fprintln(w)
}

// seconds formats s seconds to the microsecond.
func seconds(s float64) string {
	return time.Duration(s * float64(time.Second)).Round(time.Microsecond).String()
}

func printCandidates(w io.Writer, d *scheduler.Decision) {
	// Columns: the terms in the order the strategy produced them.
	var names []string
	for _, c := range d.Candidates {
		for _, t := range c.Terms {
			if !slices.Contains(names, t.Name) {
				names = append(names, t.Name)
			}
		}
	}
	lines := slices.Clone(d.Candidates)
	slices.SortStableFunc(lines, func(a, b scoring.Line) int {
		switch {
		case a.Worker == d.Worker:
			return -1
		case b.Worker == d.Worker:
			return 1
		case a.Total < b.Total:
			return -1
		case a.Total > b.Total:
			return 1
		}
		return 0
	})
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	header := append([]string{"", "worker", "active/cap", "total"}, names...)
	fmt.Fprintln(tw, strings.Join(header, "\t")+"\t")
	for _, l := range lines {
		mark := " "
		if l.Worker == d.Worker {
			mark = "*"
		}
		row := []string{mark, l.Worker, fmt.Sprintf("%d/%s", l.Active, CapString(l.Cap)), total(l.Total)}
		for _, n := range names {
			row = append(row, termCell(l, n))
		}
		fmt.Fprintln(tw, strings.Join(row, "\t")+"\t")
	}
	_ = tw.Flush()
	if d.Strategy == scoring.Predicted {
		fmt.Fprintln(w, "\n(* the chosen worker; total = predicted TTFT + max_tokens·TPOT in seconds, the ttft_* terms read live; lowest wins; ? unknown: the prior's)")
		return
	}
	fmt.Fprintln(w, "\n(* the chosen worker; total = Σ weight·value + active weight·active; lowest wins; ? unknown)")
}

func total(v float64) string {
	if scoring.IsInfinite(v) {
		return "+inf"
	}
	return fmt.Sprintf("%.2f", v)
}

func termCell(l scoring.Line, name string) string {
	for _, t := range l.Terms {
		if t.Name != name {
			continue
		}
		if t.Unknown {
			return "?"
		}
		return fmt.Sprintf("%.3g", t.Value)
	}
	return ""
}

// PrintJSON writes v as indented JSON.
func PrintJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// sloSource says where an objective came from, in words.
func sloSource(s scheduler.SLOSource) string {
	switch s {
	case scheduler.SLOHeader:
		return "from the request's header"
	case scheduler.SLOClamped:
		return "the header asked tighter; clamped to the key's bound"
	case scheduler.SLOObjective:
		return "configured for its llm-d objective"
	case scheduler.SLOConfig:
		return "configured for its model and priority"
	case scheduler.SLODefault:
		return "the default"
	}
	return string(s)
}
