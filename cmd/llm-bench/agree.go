package main

import (
	"context"
	"errors"
	"flag"
	"io"

	"github.com/llm-router/llm-router/benchmark/compare"
)

// agree checks that several runs of one comparison agree: every setup's
// p90 TTFT interval overlaps across them.
func agree(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("agree", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		_, _ = io.WriteString(stderr, "usage: llm-bench agree compare-NAME.json compare-NAME.json ...\n")
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	as, err := compare.Agree(fs.Args())
	if err != nil {
		return err
	}
	if !compare.PrintAgreement(stdout, as) {
		return errors.New("the runs disagree: some p90 TTFT intervals do not overlap")
	}
	return nil
}
