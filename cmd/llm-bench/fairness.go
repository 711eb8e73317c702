package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/llm-router/llm-router/benchmark/fairness"
)

// fairnessCommand is `llm-bench fairness`: VTC's scenarios through three
// replicas in virtual time, under llm-router's fair queue, first come
// first served and llm-d's per-replica round robin.
func fairnessCommand(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("fairness", flag.ContinueOnError)
	fs.SetOutput(stderr)
	seeds := fs.Int("seeds", 10, "seeds per scenario and dispatcher")
	names := fs.String("scenarios", "two,three,onoff", "scenarios, comma-separated: two, three, onoff")
	duration := fs.Duration("duration", 0, "virtual length of each run (0: the scenario's, 10m)")
	md := fs.String("md", "", "also write the Markdown report to this file")
	js := fs.String("json", "", "write every seed's figures as JSON to this file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var scs []fairness.Scenario
	for _, sc := range fairness.Scenarios() {
		if slices.Contains(strings.Split(*names, ","), sc.Name) {
			if *duration > 0 {
				sc.Duration = *duration
				sc.Warmup = min(sc.Warmup, *duration/4)
			}
			scs = append(scs, sc)
		}
	}
	if len(scs) == 0 {
		return fmt.Errorf("--scenarios %q names none of two, three, onoff", *names)
	}
	start := time.Now()
	rs, err := fairness.Run(fairness.Options{Scenarios: scs, Seeds: *seeds, Progress: func(sc, d string, seed int) {
		fmt.Fprintf(stderr, "%s %s seed %d done (%s)\n", sc, d, seed, time.Since(start).Round(time.Millisecond))
	}})
	if err != nil {
		return err
	}
	var b strings.Builder
	fairness.Markdown(&b, scs, rs, "llm-bench fairness "+strings.Join(args, " "))
	fmt.Fprint(stdout, b.String())
	if *md != "" {
		if err := os.WriteFile(*md, []byte(b.String()), 0o600); err != nil {
			return err
		}
	}
	if *js != "" {
		raw, err := json.MarshalIndent(rs, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(*js, raw, 0o600); err != nil {
			return err
		}
	}
	return nil
}
