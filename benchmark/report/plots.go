package report

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/llm-router/llm-router/benchmark/fleet"
	"github.com/llm-router/llm-router/benchmark/loadgen"

	"github.com/llm-router/llm-router/benchmark/stats"
)

// WritePlots draws the comparison's figures into dir under names: the
// TTFT and E2E CDFs, p99 TTFT against load, hit rate per setup and the
// in-flight requests per GPU. The latency plots read the runs the tables
// pool (no overloaded seed). A plot with no valid data is still written,
// as a panel saying why, so that latest/ never keeps an earlier
// comparison's plot under its name; rep.PlotNotes records why for the
// report.
func WritePlots(dir string, rep *Report, mainLoad float64, names []string) error {
	rep.PlotNotes = map[string]string{}
	note := func(name, why string, err error) error {
		if why != "" {
			rep.PlotNotes[name] = why
		}
		return err
	}
	main := runsAt(pooledRuns(rep), mainLoad)
	load := mainLoad
	if len(main) > 0 {
		load = main[0].Summary.Load
	} else if l, ok := ClosestLoad(rep.Loads, mainLoad); ok {
		load = l
	}
	title := fmt.Sprintf("%s, %.0f%% of capacity, seeds pooled", rep.Name, 100*load)
	ttft := func(r loadgen.Result) (time.Duration, bool) { return r.TTFT, r.OK() }
	e2e := func(r loadgen.Result) (time.Duration, bool) { return r.Latency, r.OK() }
	why, err := cdfPlot(filepath.Join(dir, names[0]), "TTFT, "+title, "TTFT (s, GPU time)", main, rep.Measured, ttft)
	if err := note(names[0], why, err); err != nil {
		return err
	}
	why, err = cdfPlot(filepath.Join(dir, names[1]), "end-to-end latency, "+title, "E2E (s, GPU time)", main, rep.Measured, e2e)
	if err := note(names[1], why, err); err != nil {
		return err
	}
	why, err = loadPlot(filepath.Join(dir, names[2]), rep)
	if err := note(names[2], why, err); err != nil {
		return err
	}
	why, err = hitPlot(filepath.Join(dir, names[3]), rep, load)
	if err := note(names[3], why, err); err != nil {
		return err
	}
	// Every run of the first seed at the load, void or not: the in-flight
	// plot is a per-run view, and an overloaded run's is what shows it.
	var first []*Run
	for _, r := range runsAt(rep.Runs, mainLoad) {
		if len(rep.Seeds) > 0 && r.Seed == rep.Seeds[0] {
			first = append(first, r)
		}
	}
	why, err = inflightPlot(filepath.Join(dir, names[4]), rep.Fleet, first)
	return note(names[4], why, err)
}

// pooledRuns are the runs the tables pool: those of no overloaded seed.
func pooledRuns(rep *Report) []*Run {
	var out []*Run
	for _, r := range rep.Runs {
		if !slices.Contains(rep.Overload, OverloadKey(r.Summary.Load, r.Seed)) {
			out = append(out, r)
		}
	}
	return out
}

// noData is why a plot has nothing to draw.
const noData = "no valid data: every run at this load was void (overload) or failed; see the report's Runs table"

// emptyPlot writes a panel that says why a plot has no data.
func emptyPlot(path, title, why string) error {
	p := plot.New()
	p.Title.Text = title
	p.HideAxes()
	l, err := plotter.NewLabels(plotter.XYLabels{XYs: []plotter.XY{{X: 0.5, Y: 0.5}}, Labels: []string{why}})
	if err != nil {
		return err
	}
	for i := range l.TextStyle {
		l.TextStyle[i].XAlign = draw.XCenter
	}
	p.Add(l)
	p.X.Min, p.X.Max, p.Y.Min, p.Y.Max = 0, 1, 0, 1
	return p.Save(9*vg.Inch, 3*vg.Inch, path)
}

// logRange keeps a log axis drawable once its data are added: gonum
// widens a one-value range by ±1, which reaches 0 or below for values
// under 1, and a log axis then panics.
func logRange(a *plot.Axis) {
	if a.Min <= 0 || math.IsInf(a.Min, 0) || math.IsNaN(a.Min) {
		a.Min = 1e-3
	}
	if a.Max < a.Min || math.IsInf(a.Max, 0) || math.IsNaN(a.Max) {
		a.Max = a.Min
	}
	if a.Max/a.Min < 10 {
		mid := math.Sqrt(a.Min * a.Max)
		a.Min, a.Max = mid/math.Sqrt(10), mid*math.Sqrt(10)
	}
}

// hitPlot draws each setup's prefix hit rate (mean over seeds) at load,
// beside the fleet-KV ceiling.
func hitPlot(path string, rep *Report, load float64) (string, error) {
	title := fmt.Sprintf("prefix-cache hit rate, %s, %.0f%% load", rep.Name, 100*load)
	p := newPlot(title, "", "hit rate (% of prompt tokens)")
	var vals plotter.Values
	var labels []string
	for _, s := range rep.Stats {
		if s.Load == load && len(s.Seeds) > 0 {
			vals = append(vals, 100*s.HitRate.Value)
			labels = append(labels, s.Setup)
		}
	}
	if len(vals) == 0 {
		return noData, emptyPlot(path, title, noData)
	}
	if c := rep.Ceilings; c != nil && len(rep.Seeds) > 0 {
		greedy, pooled := 0.0, 0.0
		for _, seed := range rep.Seeds {
			greedy += c.Fleet[seed] / float64(len(rep.Seeds))
			pooled += c.Pooled[seed] / float64(len(rep.Seeds))
		}
		vals = append(vals, 100*greedy, 100*pooled)
		labels = append(labels, "ceiling: fleet KV, greedy", "ceiling: fleet KV, pooled")
	}
	bars, err := plotter.NewBarChart(vals, vg.Points(18))
	if err != nil {
		return "", err
	}
	bars.Color = plotutil.Color(0)
	p.Add(bars)
	p.NominalX(labels...)
	p.X.Tick.Label.Rotation = 0.6
	p.X.Tick.Label.XAlign, p.X.Tick.Label.YAlign = draw.XRight, draw.YCenter
	return "", p.Save(10*vg.Inch, 6*vg.Inch, path)
}

// runsAt returns the runs at the load closest to want.
func runsAt(runs []*Run, want float64) []*Run {
	best := math.Inf(1)
	for _, r := range runs {
		best = math.Min(best, math.Abs(r.Summary.Load-want))
	}
	var out []*Run
	for _, r := range runs {
		if math.Abs(r.Summary.Load-want) == best {
			out = append(out, r)
		}
	}
	return out
}

// style gives setup i its own colour and dash pattern.
func style(i int) (color.Color, []vg.Length) { return plotutil.Color(i), plotutil.Dashes(i % 4) }

func newPlot(title, x, y string) *plot.Plot {
	p := plot.New()
	p.Title.Text, p.X.Label.Text, p.Y.Label.Text = title, x, y
	p.Legend.Top, p.Legend.Left = false, false
	p.Add(plotter.NewGrid())
	return p
}

// cdfPlot draws the empirical CDF of one latency of the measured,
// successful requests of each run, on a log time axis.
func cdfPlot(path, title, xlabel string, runs []*Run, win [2]int, pick func(loadgen.Result) (time.Duration, bool)) (string, error) {
	p := newPlot(title, xlabel, "fraction of requests")
	p.X.Scale, p.X.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
	p.Legend.Top, p.Legend.Left = true, true // a CDF's upper left is empty
	var setups []string
	pooled := map[string][]time.Duration{}
	for _, r := range runs {
		name := r.Summary.Setup
		if _, ok := pooled[name]; !ok {
			setups = append(setups, name)
			pooled[name] = nil
		}
		rs := r.Results
		if win[0] < win[1] && win[1] <= len(rs) {
			rs = rs[win[0]:win[1]]
		}
		for _, res := range rs {
			if d, ok := pick(res); ok && d > 0 {
				pooled[name] = append(pooled[name], d)
			}
		}
	}
	drawn := 0
	for i, name := range setups {
		ds := pooled[name]
		if len(ds) == 0 {
			continue
		}
		ds = stats.SortedDurations(ds)
		pts := make(plotter.XYs, len(ds))
		for k, d := range ds {
			pts[k] = plotter.XY{X: d.Seconds(), Y: float64(k+1) / float64(len(ds))}
		}
		l, err := plotter.NewLine(pts)
		if err != nil {
			return "", err
		}
		l.Color, l.Dashes = style(i)
		l.Width = vg.Points(1.5)
		p.Add(l)
		p.Legend.Add(name, l)
		drawn++
	}
	if drawn == 0 {
		return noData, emptyPlot(path, title, noData)
	}
	logRange(&p.X)
	return "", p.Save(9*vg.Inch, 5.5*vg.Inch, path)
}

// loadPlot draws each setup's p99 TTFT against the load.
func loadPlot(path string, rep *Report) (string, error) {
	title := "p99 TTFT against load, " + rep.Name + ", seeds pooled"
	p := newPlot(title, "load (share of measured capacity, %)", "p99 TTFT (s, GPU time)")
	p.Y.Scale, p.Y.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
	p.Legend.Top, p.Legend.Left = true, true
	var names []string
	series := map[string]plotter.XYs{}
	for _, s := range rep.Stats {
		if len(s.Seeds) == 0 {
			continue
		}
		if _, ok := series[s.Setup]; !ok {
			names = append(names, s.Setup)
		}
		series[s.Setup] = append(series[s.Setup], plotter.XY{X: 100 * s.Load, Y: math.Max(s.TTFT[2].Value/1000, 1e-3)})
	}
	if len(names) == 0 {
		why := "no valid data: no configuration has figures at any load (every seed void: overload); see the report's Runs table"
		return why, emptyPlot(path, title, why)
	}
	// Loads of 50 to 100 %, whatever was run, so one load is a column of
	// points in the middle rather than a degenerate axis.
	p.X.Min, p.X.Max = 50, 100
	for _, r := range rep.Runs {
		p.X.Min = math.Min(p.X.Min, 100*r.Summary.Load-5)
		p.X.Max = math.Max(p.X.Max, 100*r.Summary.Load+5)
	}
	for i, n := range names {
		l, pts, err := plotter.NewLinePoints(series[n])
		if err != nil {
			return "", err
		}
		l.Color, l.Dashes = style(i)
		l.Width = vg.Points(1.5)
		pts.Color, pts.Shape = l.Color, plotutil.Shape(i)
		p.Add(l, pts)
		p.Legend.Add(n, l, pts)
	}
	logRange(&p.Y)
	return "", p.Save(9*vg.Inch, 5.5*vg.Inch, path)
}

// inflightPlot draws, for each run, every GPU's running requests over
// time: one tile per setup, one line per GPU.
// A void run's tile says so in its title.
func inflightPlot(path string, gpus []fleet.GPU, runs []*Run) (string, error) {
	if len(runs) == 0 {
		why := "no run of the first seed at this load"
		return why, emptyPlot(path, "in-flight requests per GPU", why)
	}
	const cols = 2
	rows := (len(runs) + cols - 1) / cols
	grid := make([][]*plot.Plot, rows)
	for i := range grid {
		grid[i] = make([]*plot.Plot, cols)
	}
	for i, r := range runs {
		title := r.Summary.Setup
		if len(r.Void) > 0 {
			title += " (VOID: " + strings.Join(r.Void, ", ") + ")"
		}
		p := newPlot(title, "time (s, GPU time)", "running")
		p.Title.TextStyle.Font.Size = vg.Points(10)
		p.Legend.Top, p.Legend.Left = true, true
		p.Legend.TextStyle.Font.Size = vg.Points(7)
		for g, gpu := range gpus {
			var pts plotter.XYs
			for _, s := range r.Inflight {
				if g < len(s.Running) && s.Running[g] >= 0 {
					pts = append(pts, plotter.XY{X: s.T, Y: float64(s.Running[g])})
				}
			}
			if len(pts) == 0 {
				continue
			}
			l, err := plotter.NewLine(pts)
			if err != nil {
				return "", err
			}
			l.Color, l.Dashes = plotutil.Color(g), plotutil.Dashes(g/2%3)
			p.Add(l)
			if i == 0 {
				p.Legend.Add(gpu.ID, l)
			}
		}
		grid[i/cols][i%cols] = p
	}
	w, h := 11*vg.Inch, vg.Length(rows)*3*vg.Inch
	img := vgimg.New(w, h)
	dc := draw.New(img)
	tiles := draw.Tiles{
		Rows: rows, Cols: cols, PadX: vg.Millimeter * 4, PadY: vg.Millimeter * 4,
		PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2,
	}
	canvases := plot.Align(grid, tiles, dc)
	for j := range grid {
		for i, p := range grid[j] {
			if p != nil {
				p.Draw(canvases[j][i])
			}
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return "", err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		_ = f.Close()
		return "", err
	}
	return "", f.Close()
}
