package benchmark

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// writePlots draws the comparison's figures into dir under names: the
// TTFT and E2E CDFs, p99 TTFT against load, hit rate per setup and the
// in-flight requests per GPU.
func writePlots(dir string, rep *CompareReport, mainLoad float64, names []string) error {
	main := runsAt(rep.Runs, mainLoad)
	if len(main) == 0 {
		return nil
	}
	title := fmt.Sprintf("%s, %.0f%% of capacity, seeds pooled", rep.Name, 100*main[0].Summary.Load)
	ttft := func(r Result) (time.Duration, bool) { return r.TTFT, r.OK() }
	e2e := func(r Result) (time.Duration, bool) { return r.Latency, r.OK() }
	if err := cdfPlot(filepath.Join(dir, names[0]), "TTFT, "+title, "TTFT (s, GPU time)", main, rep.Measured, ttft); err != nil {
		return err
	}
	if err := cdfPlot(filepath.Join(dir, names[1]), "end-to-end latency, "+title, "E2E (s, GPU time)", main, rep.Measured, e2e); err != nil {
		return err
	}
	if err := loadPlot(filepath.Join(dir, names[2]), rep); err != nil {
		return err
	}
	if err := hitPlot(filepath.Join(dir, names[3]), rep, main[0].Summary.Load); err != nil {
		return err
	}
	var first []*Run
	for _, r := range main {
		if r.Seed == rep.Seeds[0] {
			first = append(first, r)
		}
	}
	return inflightPlot(filepath.Join(dir, names[4]), rep.Fleet, first)
}

// hitPlot draws each setup's prefix hit rate (mean over seeds) at load,
// beside the fleet-KV ceiling.
func hitPlot(path string, rep *CompareReport, load float64) error {
	p := newPlot(fmt.Sprintf("prefix-cache hit rate, %s, %.0f%% load", rep.Name, 100*load), "", "hit rate (% of prompt tokens)")
	var vals plotter.Values
	var labels []string
	for _, s := range rep.Stats {
		if s.Load == load && len(s.Seeds) > 0 {
			vals = append(vals, 100*s.HitRate.Value)
			labels = append(labels, s.Setup)
		}
	}
	if c := rep.Ceilings; c != nil {
		greedy, pooled := 0.0, 0.0
		for _, seed := range rep.Seeds {
			greedy += c.Fleet[seed] / float64(len(rep.Seeds))
			pooled += c.Pooled[seed] / float64(len(rep.Seeds))
		}
		vals = append(vals, 100*greedy, 100*pooled)
		labels = append(labels, "ceiling: fleet KV, greedy", "ceiling: fleet KV, pooled")
	}
	if len(vals) == 0 {
		return nil
	}
	bars, err := plotter.NewBarChart(vals, vg.Points(18))
	if err != nil {
		return err
	}
	bars.Color = plotutil.Color(0)
	p.Add(bars)
	p.NominalX(labels...)
	p.X.Tick.Label.Rotation = 0.6
	p.X.Tick.Label.XAlign, p.X.Tick.Label.YAlign = draw.XRight, draw.YCenter
	return p.Save(10*vg.Inch, 6*vg.Inch, path)
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
func cdfPlot(path, title, xlabel string, runs []*Run, win [2]int, pick func(Result) (time.Duration, bool)) error {
	p := newPlot(title, xlabel, "fraction of requests")
	p.X.Scale, p.X.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
	p.Legend.Top, p.Legend.Left = true, true // a CDF's upper left is empty
	var setups []string
	pooled := map[string][]time.Duration{}
	for _, r := range runs {
		name := r.Summary.Setup
		if _, ok := pooled[name]; !ok {
			setups = append(setups, name)
		}
		rs := r.results
		if win[1] <= len(rs) {
			rs = rs[win[0]:win[1]]
		}
		for _, res := range rs {
			if d, ok := pick(res); ok && d > 0 {
				pooled[name] = append(pooled[name], d)
			}
		}
	}
	for i, name := range setups {
		ds := pooled[name]
		if len(ds) == 0 {
			continue
		}
		ds = sortedDurations(ds)
		pts := make(plotter.XYs, len(ds))
		for k, d := range ds {
			pts[k] = plotter.XY{X: d.Seconds(), Y: float64(k+1) / float64(len(ds))}
		}
		l, err := plotter.NewLine(pts)
		if err != nil {
			return err
		}
		l.Color, l.Dashes = style(i)
		l.Width = vg.Points(1.5)
		p.Add(l)
		p.Legend.Add(name, l)
	}
	return p.Save(9*vg.Inch, 5.5*vg.Inch, path)
}

// loadPlot draws each setup's p99 TTFT against the load.
func loadPlot(path string, rep *CompareReport) error {
	p := newPlot("p99 TTFT against load, "+rep.Name+", seeds pooled", "load (share of measured capacity, %)", "p99 TTFT (s, GPU time)")
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
			return err
		}
		l.Color, l.Dashes = style(i)
		l.Width = vg.Points(1.5)
		pts.Color, pts.Shape = l.Color, plotutil.Shape(i)
		p.Add(l, pts)
		p.Legend.Add(n, l, pts)
	}
	return p.Save(9*vg.Inch, 5.5*vg.Inch, path)
}

// inflightPlot draws, for each run, every GPU's running requests over
// time: one tile per setup, one line per GPU.
func inflightPlot(path string, gpus []GPU, runs []*Run) error {
	const cols = 2
	rows := (len(runs) + cols - 1) / cols
	grid := make([][]*plot.Plot, rows)
	for i := range grid {
		grid[i] = make([]*plot.Plot, cols)
	}
	for i, r := range runs {
		p := newPlot(r.Summary.Setup, "time (s, GPU time)", "running")
		p.Title.TextStyle.Font.Size = vg.Points(10)
		p.Legend.Top, p.Legend.Left = true, true
		p.Legend.TextStyle.Font.Size = vg.Points(7)
		for g := range gpus {
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
				return err
			}
			l.Color, l.Dashes = plotutil.Color(g), plotutil.Dashes(g/2%3)
			p.Add(l)
			if i == 0 {
				p.Legend.Add(gpus[g].ID, l)
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
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}
