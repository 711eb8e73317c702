// Package report is a strategy comparison's record and its writers: the
// data model of one comparison (Report, its Runs, Capacity, Ceilings,
// Aims and machine Budget), the rules that make a run or a whole
// comparison void, and the files written from it: the JSON, the CSVs,
// the Markdown report (WriteMarkdown) and the plots (WritePlots), all
// published to a run folder by Write. benchmark/compare runs the
// comparison and fills the Report; this package only reads it.
package report
