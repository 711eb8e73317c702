package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/llm-router/llm-router/benchmark/sim"
)

// simValidateCommand is `llm-bench sim validate`: the simulator on the
// fleets, workloads, seeds and rates of llm-bench compare results, every
// figure beside the real one and its interval.
func simValidateCommand(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("sim validate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	against := fs.String("against", "", "compare-NAME.json results, comma-separated (run from the repository root: their trace paths are relative to it)")
	var out simOutputs
	fs.StringVar(&out.json, "json", "", "write the validations as JSON to this file")
	fs.StringVar(&out.markdown, "md", "", "write the Markdown report to this file (it always goes to stdout)")
	fs.BoolVar(&out.quiet, "quiet", false, "no progress lines on stderr")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	paths, _ := parseList(*against, func(v string) (string, error) { return v, nil })
	if len(paths) == 0 {
		return errors.New("--against: no compare result given")
	}
	progress := stderr
	if out.quiet {
		progress = nil
	}
	var vs []*sim.Validation
	for _, p := range paths {
		rep, err := sim.ReadCompare(p)
		if err != nil {
			return fmt.Errorf("--against: %w", err)
		}
		v, err := sim.Validate(rep, p, progress)
		if err != nil {
			return err
		}
		vs = append(vs, v)
	}
	command := strings.TrimSpace("llm-bench sim validate " + strings.Join(args, " "))
	write := func(w io.Writer) error {
		fmt.Fprintf(w, "# The simulator against the real stack\n\nCommand: `%s`\n\n", command)
		fmt.Fprintln(w, "Each cell: ✓ (inside) or ✗ (outside) the real 95 % interval, then the simulator's value vs the real value [interval], and their ratio. TTFT and good-fraction intervals are the bootstrap's over seeds and requests (benchmark/stats), as compare computes them; prefix hit rate's are the min and max over seeds.")
		fmt.Fprintln(w)
		for _, v := range vs {
			v.WriteMarkdown(w)
		}
		return nil
	}
	if out.json != "" {
		if err := writeFile(out.json, func(w io.Writer) error { return sim.WriteValidationsJSON(w, vs) }); err != nil {
			return err
		}
	}
	if out.markdown != "" {
		if err := writeFile(out.markdown, write); err != nil {
			return err
		}
	}
	return write(stdout)
}
