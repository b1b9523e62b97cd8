package main

// Charts of `symheap bench --plot DIR` (gonum.org/v1/plot):
//
//	put_get_latency.png  Put and Get latency vs size, ours, OpenSHMEM and the
//	                     floors (log-log)
//	put_bandwidth.png    Put bandwidth vs size, ours, OpenSHMEM and memcpy (log-log)
//	msg_latency.png      Send/Recv latency vs size, both buffer kinds, Open MPI
//	                     and the floor (log-log)
//	msg_bandwidth.png    Send/Recv bandwidth vs size, and memcpy (log-log)
//	copy_bandwidth.png   Go copy and glibc memcpy, warm and cold (log-log)
//	scalars.png          fetch-add, barrier, collective malloc+free, reduce and
//	                     broadcast: ours vs OpenSHMEM and the floor, bars on a
//	                     log axis
//
// The floor of a table (bench_floorcol.go) is a dotted black line (a grey
// bar in scalars.png); its ingredients are not drawn.
//
// A chart is written only when its tests ran. Ours are solid lines with
// round markers, the peers dashed with other markers; colours are fixed
// per contender, so that one reads the same in every chart.

import (
	"fmt"
	"image"
	"image/color"
	"image/color/palette"
	imgdraw "image/draw"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

var (
	// Ours: six colours apart from the peers' (the copy chart has six
	// series of ours).
	colOurs = []color.Color{color.RGBA{31, 119, 180, 255}, color.RGBA{148, 103, 189, 255}, color.RGBA{23, 190, 207, 255},
		color.RGBA{188, 189, 34, 255}, color.RGBA{227, 119, 194, 255}, color.RGBA{20, 50, 110, 255}}
	colPeers = map[string]color.Color{
		"osh":       color.RGBA{255, 127, 14, 255},
		"mpi":       color.RGBA{44, 160, 44, 255},
		"memcpy":    color.RGBA{127, 127, 127, 255},
		"cacheline": color.RGBA{214, 39, 40, 255},
		"floor":     color.RGBA{0, 0, 0, 255},
	}
	colOther = color.RGBA{140, 86, 75, 255}
)

const (
	chartW = 17 * vg.Centimeter
	chartH = 10.5 * vg.Centimeter
)

// writePlots writes the charts into dir and returns their paths.
func writePlots(dir string, rep *benchReport) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	byID := map[string]*section{}
	for _, s := range rep.Sections {
		byID[s.ID] = s
	}
	var files []string
	save := func(p *plot.Plot, name string) error {
		path := filepath.Join(dir, name)
		if err := savePNG(p, path); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		files = append(files, path)
		return nil
	}
	sub := fmt.Sprintf("%d PEs, %s", rep.Settings.PEs, rep.Machine.CPUModel)
	charts := []struct {
		file, title, ylabel string
		ids                 []string
	}{
		{"put_get_latency.png", "Put and Get latency (lower is better)", "latency (µs)", []string{"put_lat", "get_lat"}},
		{"put_bandwidth.png", "Put bandwidth (higher is better)", "bandwidth (MB/s, 10⁶ B/s)", []string{"put_bw"}},
		{"msg_latency.png", "Send/Recv latency, half round trip (lower is better)", "latency (µs)", []string{"msg_lat"}},
		{"msg_bandwidth.png", "Send/Recv bandwidth (higher is better)", "bandwidth (MB/s, 10⁶ B/s)", []string{"msg_bw"}},
		{"copy_bandwidth.png", "Go copy, symheap's copy and glibc memcpy (higher is better)", "bandwidth (MB/s, 10⁶ B/s)", []string{"copy"}},
	}
	for _, c := range charts {
		var secs []*section
		for _, id := range c.ids {
			if s := byID[id]; s != nil {
				secs = append(secs, s)
			}
		}
		if len(secs) == 0 {
			continue
		}
		title := c.title
		if c.file == "copy_bandwidth.png" && !hasPeer(secs) {
			title = "Go copy and symheap's copy (higher is better)"
		}
		p, err := sizeChart(title+"\n"+sub, c.ylabel, secs[0].Unit == "us", secs)
		if err != nil {
			return files, fmt.Errorf("%s: %w", c.file, err)
		}
		if p == nil {
			continue
		}
		if err := save(p, c.file); err != nil {
			return files, err
		}
	}
	p, err := scalarChart(sub, byID)
	if err != nil {
		return files, fmt.Errorf("scalars.png: %w", err)
	}
	if p != nil {
		if err := save(p, "scalars.png"); err != nil {
			return files, err
		}
	}
	return files, nil
}

// savePNG renders p and writes it as a paletted PNG: the charts hold a
// few flat colours, and the Plan 9 palette keeps them (and the
// anti-aliasing) legible at about a quarter of an RGBA PNG's size, which
// matters for images committed to the repository.
func savePNG(p *plot.Plot, path string) error {
	c := vgimg.New(chartW, chartH)
	p.Draw(draw.New(c))
	img := c.Image()
	pal := image.NewPaletted(img.Bounds(), palette.Plan9)
	imgdraw.Draw(pal, img.Bounds(), img, image.Point{}, imgdraw.Src)
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	enc := png.Encoder{CompressionLevel: png.BestCompression}
	if err := enc.Encode(f, pal); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// sizeChart draws every series of secs against message size, log-log.
// Sizes of 0 bytes cannot sit on a log axis and are left out. A table's
// floor is a dotted black line; the floor's ingredients are not drawn.
func sizeChart(title, ylabel string, latency bool, secs []*section) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "message size (bytes)"
	p.Y.Label.Text = ylabel
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	p.X.Tick.Marker = sizeTicks{}
	p.Y.Tick.Marker = logTicks{}
	// Latency rises with size and bandwidth levels off: the legend goes
	// where the curves are not.
	p.Legend.Top, p.Legend.Left = !latency, !latency
	p.Legend.ThumbnailWidth = 0.9 * vg.Centimeter
	p.Legend.TextStyle.Font.Size = vg.Points(9)
	p.Add(plotter.NewGrid())
	ours, drawn := 0, 0
	peerSeen := map[string]int{}
	for _, s := range secs {
		for _, sr := range s.Series {
			if sr.Floor {
				continue
			}
			var xys plotter.XYs
			for _, pt := range sr.Points {
				if pt.Size > 0 && pt.Value > 0 {
					xys = append(xys, plotter.XY{X: float64(pt.Size), Y: pt.Value})
				}
			}
			if len(xys) == 0 {
				continue
			}
			line, points, err := plotter.NewLinePoints(xys)
			if err != nil {
				return nil, err
			}
			line.Width = vg.Points(1.6)
			points.Radius = vg.Points(2.2)
			label := sr.Label
			if sr.Derived {
				line.Color, points.Color = peerColor("floor"), peerColor("floor")
				line.Width, points.Radius = vg.Points(1.2), vg.Points(1.2)
				line.Dashes = []vg.Length{vg.Points(1.5), vg.Points(2.5)}
				if len(secs) > 1 {
					label += ", " + strings.ToLower(strings.Fields(s.Title)[0])
				}
				p.Add(line, points)
				p.Legend.Add(label, line, points)
				continue
			}
			// The n-th series of ours, or of one peer, on this chart.
			nth := ours
			c := colOurs[nth%len(colOurs)]
			if sr.Ours {
				ours++
			} else {
				nth = peerSeen[sr.Harness]
				peerSeen[sr.Harness]++
				c = peerColor(sr.Harness)
			}
			line.Color, points.Color = c, c
			points.Shape = glyphs[(nth*2+boolInt(!sr.Ours))%len(glyphs)]
			switch {
			case !sr.Ours && nth == 0:
				line.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
			case !sr.Ours:
				line.Dashes = []vg.Length{vg.Points(7), vg.Points(2), vg.Points(1.5), vg.Points(2)}
			default:
				line.Dashes = ourDashes[nth%len(ourDashes)]
			}
			p.Add(line, points)
			p.Legend.Add(label, line, points)
			drawn++
		}
	}
	if drawn == 0 {
		return nil, nil
	}
	return p, nil
}

// ourDashes tell ours apart beside their colours: solid, dotted, dashed,
// dash-dot, long dashes, dash-dot-dot.
var ourDashes = [][]vg.Length{
	nil,
	{vg.Points(1.5), vg.Points(2)},
	{vg.Points(5), vg.Points(2.5)},
	{vg.Points(6), vg.Points(2), vg.Points(1.5), vg.Points(2)},
	{vg.Points(10), vg.Points(3)},
	{vg.Points(6), vg.Points(2), vg.Points(1.5), vg.Points(2), vg.Points(1.5), vg.Points(2)},
}

// hasPeer reports whether secs have a series of a peer.
func hasPeer(secs []*section) bool {
	for _, s := range secs {
		for _, sr := range s.Series {
			if !sr.Ours && !sr.Floor && !sr.Derived && len(sr.Points) > 0 {
				return true
			}
		}
	}
	return false
}

// logTicks marks a log axis: labelled powers of ten over a wide range;
// over less than three decades (a quick run's few sizes), labelled 1, 2
// and 5 times each power of ten, so that the axis never has one label.
type logTicks struct{}

func (logTicks) Ticks(lo, hi float64) []plot.Tick {
	if lo <= 0 || hi <= lo {
		return nil
	}
	narrow := math.Log10(hi/lo) < 3
	var ticks []plot.Tick
	for e := math.Floor(math.Log10(lo)); e <= math.Ceil(math.Log10(hi)); e++ {
		for m := 1; m <= 9; m++ {
			v := float64(m) * math.Pow(10, e)
			if v < lo/1.001 || v > hi*1.001 {
				continue
			}
			t := plot.Tick{Value: v}
			if m == 1 || narrow && (m == 2 || m == 5) {
				t.Label = strconv.FormatFloat(v, 'g', -1, 64)
			}
			ticks = append(ticks, t)
		}
	}
	return ticks
}

// glyphs: ours take the even ones, the peers the odd ones.
var glyphs = []draw.GlyphDrawer{draw.CircleGlyph{}, draw.TriangleGlyph{}, draw.SquareGlyph{}, draw.PyramidGlyph{}, draw.RingGlyph{}, draw.BoxGlyph{}}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func peerColor(h string) color.Color {
	if c, ok := colPeers[h]; ok {
		return c
	}
	return colOther
}

// sizeTicks marks powers of two on a log axis of bytes, labelled every
// third one (1, 8, 64, 512, 4K ...).
type sizeTicks struct{}

func (sizeTicks) Ticks(min, max float64) []plot.Tick {
	var ticks []plot.Tick
	for e := 0; e <= 40; e++ {
		v := math.Ldexp(1, e)
		if v < min/1.01 || v > max*1.01 {
			continue
		}
		t := plot.Tick{Value: v}
		if e%3 == 0 {
			t.Label = shortSize(int64(v))
		}
		ticks = append(ticks, t)
	}
	return ticks
}

// shortSize: 8, 4K, 2M.
func shortSize(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%dG", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dM", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%dK", n>>10)
	}
	return fmt.Sprint(n)
}

// scalarChart draws one group of bars per scalar figure: ours,
// OpenSHMEM's when it was measured, and the floor, on a log axis of
// microseconds; the tick label carries the ratios.
func scalarChart(sub string, byID map[string]*section) (*plot.Plot, error) {
	type group struct {
		label               string
		ours, theirs, floor float64
	}
	var groups []group
	addRows := func(id, metric, name string, label func(k int64) string) {
		s := byID[id]
		if s == nil {
			return
		}
		num, den, fl := s.seriesIndex(ourHarness+":"+metric), s.seriesIndex("osh:"+metric), s.seriesIndex(fDerived)
		if num < 0 {
			return
		}
		for _, k := range s.rows() {
			g := group{label: name + "\n" + label(k), theirs: math.NaN(), ours: math.NaN(), floor: math.NaN()}
			if p := s.find(num, k); p != nil {
				g.ours = p.Value
			}
			if fl >= 0 {
				if p := s.find(fl, k); p != nil {
					g.floor = p.Value
				}
			}
			if den >= 0 {
				if p := s.find(den, k); p != nil {
					g.theirs = p.Value
				}
			}
			if g.ours > 0 {
				groups = append(groups, g)
			}
		}
	}
	addRows("fadd", "fadd_lat", "fetch-add", func(int64) string { return "" })
	addRows("barrier", "barrier_lat", "barrier", func(k int64) string { return fmt.Sprintf("%d PEs", k) })
	addRows("malloc", "malloc_lat", "malloc+free", sizeName)
	addRows("reduce", "reduce_lat", "reduce", func(k int64) string { return fmt.Sprintf("%d int64", k/8) })
	addRows("bcast", "bcast_lat", "broadcast", func(k int64) string { return fmt.Sprintf("%d int64", k/8) })
	if len(groups) == 0 {
		return nil, nil
	}
	p := plot.New()
	p.Y.Label.Text = "time per operation (µs)"
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = logTicks{}
	p.Legend.Top, p.Legend.Left = true, true
	p.Legend.TextStyle.Font.Size = vg.Points(9)
	p.Add(plotter.NewGrid())
	const w = 0.27 // bar width in group units
	ours := &logBars{color: colOurs[0], offset: -w, width: w}
	theirs := &logBars{color: peerColor("osh"), offset: 0, width: w}
	floors := &logBars{color: color.RGBA{170, 170, 170, 255}, offset: w, width: w}
	var ticks []plot.Tick
	lo, hi := math.Inf(1), math.Inf(-1)
	hasPeer, hasFloor := false, false
	var labels [3]plotter.XYLabels
	for i, g := range groups {
		x := float64(i)
		ours.add(x, g.ours)
		theirs.add(x, g.theirs)
		floors.add(x, g.floor)
		label := g.label
		for j, v := range []float64{g.ours, g.theirs, g.floor} {
			if v > 0 {
				lo, hi = math.Min(lo, v), math.Max(hi, v)
				labels[j].XYs = append(labels[j].XYs, plotter.XY{X: x + []float64{-w, 0, w}[j], Y: v})
				labels[j].Labels = append(labels[j].Labels, fmtValue(v, "us"))
			}
		}
		if g.theirs > 0 {
			hasPeer = true
			label += fmt.Sprintf("\n×%s", fmtRatio(g.ours/g.theirs))
		}
		if g.floor > 0 {
			hasFloor = true
			label += fmt.Sprintf("\n%s×floor", fmtRatio(g.ours/g.floor))
		}
		ticks = append(ticks, plot.Tick{Value: x, Label: label})
	}
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
	p.X.Tick.Label.Font.Size = vg.Points(8)
	p.X.Min, p.X.Max = -0.6, float64(len(groups))-0.4
	p.Y.Min, p.Y.Max = lo/2, hi*4
	p.Add(ours)
	p.Legend.Add("symheap", ours)
	if hasPeer {
		p.Add(theirs)
		p.Legend.Add("OpenSHMEM (Open MPI)", theirs)
	}
	if hasFloor {
		p.Add(floors)
		p.Legend.Add("floor", floors)
	}
	for j := range labels {
		if len(labels[j].XYs) == 0 {
			continue
		}
		l, err := plotter.NewLabels(labels[j])
		if err != nil {
			return nil, err
		}
		for i := range l.TextStyle {
			l.TextStyle[i].Font.Size = vg.Points(6.5)
			l.TextStyle[i].XAlign = draw.XCenter
		}
		l.Offset = vg.Point{Y: vg.Points(2)}
		p.Add(l)
	}
	p.Title.Text = "Scalar figures (lower is better)\n" + sub
	if hasPeer {
		p.Title.Text = "Scalar figures, ours vs OpenSHMEM (lower is better)\n" + sub
		p.X.Label.Text = "×: ours/OpenSHMEM"
	}
	return p, nil
}

// logBars are vertical bars that stand on the bottom of the plot area, so
// that they work on a log axis (plotter.BarChart starts at 0, which a log
// axis cannot show). Offset and width are in x data units.
type logBars struct {
	xs, vs        []float64
	offset, width float64
	color         color.Color
}

func (b *logBars) add(x, v float64) { b.xs, b.vs = append(b.xs, x), append(b.vs, v) }

func (b *logBars) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	for i, v := range b.vs {
		if !(v > 0) {
			continue
		}
		x0, x1 := trX(b.xs[i]+b.offset-b.width/2), trX(b.xs[i]+b.offset+b.width/2)
		top := trY(v)
		pts := []vg.Point{{X: x0, Y: c.Min.Y}, {X: x0, Y: top}, {X: x1, Y: top}, {X: x1, Y: c.Min.Y}}
		c.FillPolygon(b.color, c.ClipPolygonY(pts))
	}
}

func (b *logBars) DataRange() (xmin, xmax, ymin, ymax float64) {
	xmin, xmax, ymin, ymax = math.Inf(1), math.Inf(-1), math.Inf(1), math.Inf(-1)
	for i, v := range b.vs {
		xmin, xmax = math.Min(xmin, b.xs[i]-0.5), math.Max(xmax, b.xs[i]+0.5)
		if v > 0 {
			ymin, ymax = math.Min(ymin, v), math.Max(ymax, v)
		}
	}
	return
}

func (b *logBars) Thumbnail(c *draw.Canvas) {
	pts := []vg.Point{{X: c.Min.X, Y: c.Min.Y}, {X: c.Min.X, Y: c.Max.Y}, {X: c.Max.X, Y: c.Max.Y}, {X: c.Max.X, Y: c.Min.Y}}
	c.FillPolygon(b.color, c.ClipPolygonY(pts))
}
