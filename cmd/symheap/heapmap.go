package main

import (
	"fmt"
	"image/color"
	"os"
	"path/filepath"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/symheap/symheap/internal/inspect"
	"github.com/symheap/symheap/internal/segment"
)

// The heap map (symheap stat --map FILE): a chart with one row per heap
// of every PE of this node, the symmetric heap and the local shared heap,
// labelled "PE 0 symmetric" and "PE 0 shared"; along the x axis the
// heap's bytes from its start, each block a bar of its size: used blocks
// in two alternating blues (so that neighbours can be told apart), free
// ones in green; a PE that died has its rows outlined in red. The title
// gives the job and the totals in use; the legend names the colours.

var (
	mapUsed  = [2]color.RGBA{{40, 90, 200, 255}, {90, 150, 235, 255}}
	mapFree  = color.RGBA{150, 215, 150, 255}
	mapEmpty = color.RGBA{225, 225, 225, 255} // a heap with no map (a PE of another node)
	mapDead  = color.RGBA{220, 30, 30, 255}
)

// heapRow is one heap of one PE.
type heapRow struct {
	blocks []inspect.Block
	size   uint64
	dead   bool
}

// heapRows plots rows as bands: row i at y = i, blocks along x in bytes.
type heapRows []heapRow

func (rows heapRows) Plot(c draw.Canvas, plt *plot.Plot) {
	trX, trY := plt.Transforms(&c)
	const half = 0.35 // of a row's height
	for i, r := range rows {
		y0, y1 := trY(float64(i)-half), trY(float64(i)+half)
		box := func(from, to uint64, col color.Color) {
			x0, x1 := trX(float64(from)), trX(float64(to))
			if x1-x0 < 0.5 {
				x1 = x0 + 0.5 // a block too small to see still shows
			}
			c.FillPolygon(col, c.ClipPolygonXY([]vg.Point{{X: x0, Y: y0}, {X: x1, Y: y0}, {X: x1, Y: y1}, {X: x0, Y: y1}}))
		}
		if r.size == 0 {
			continue
		}
		box(0, r.size, mapEmpty)
		for k, b := range r.blocks {
			col := mapFree
			if b.Used {
				col = mapUsed[k%2]
			}
			box(b.Off, b.Off+b.Size, col)
		}
		if r.dead {
			sty := draw.LineStyle{Color: mapDead, Width: vg.Points(1.5)}
			x0, x1 := trX(0), trX(float64(r.size))
			c.StrokeLines(sty, c.ClipLinesXY([]vg.Point{{X: x0, Y: y0}, {X: x1, Y: y0}, {X: x1, Y: y1}, {X: x0, Y: y1}, {X: x0, Y: y0}})...)
		}
	}
}

func (rows heapRows) DataRange() (xmin, xmax, ymin, ymax float64) {
	var most uint64
	for _, r := range rows {
		most = max(most, r.size)
	}
	// A row's worth of room above the top row, for the legend.
	return 0, float64(max(most, 1)), -0.5, float64(len(rows)) + 0.7
}

// byteTicks marks the x axis in binary units.
type byteTicks struct{}

func (byteTicks) Ticks(lo, hi float64) []plot.Tick {
	step := uint64(1)
	for float64(step)*8 < hi-lo {
		step *= 2
	}
	var ticks []plot.Tick
	for v := uint64(0); float64(v) <= hi; v += step {
		ticks = append(ticks, plot.Tick{Value: float64(v), Label: segment.FormatSize(v)})
	}
	return ticks
}

// writeHeapMap writes the heap map of the job to file, a PNG or an SVG
// by its extension.
func writeHeapMap(v *inspect.Job, ji inspect.JobInfo, file string) error {
	ext := strings.ToLower(filepath.Ext(file))
	if ext != ".png" && ext != ".svg" {
		return fmt.Errorf("stat --map %s: want a .png or .svg file", file)
	}
	var rows heapRows
	var names []string
	var inUse, size [2]uint64 // symmetric, shared
	for p := 0; p < ji.NPEs; p++ {
		for k, kind := range []string{"symmetric", "shared"} {
			blocks, sz, err := v.HeapMap(p, k == 1)
			if err != nil {
				sz, blocks = 0, nil
			}
			dead := p < len(ji.PEs) && !ji.PEs[p].Alive && ji.PEs[p].State == "dead"
			rows = append(rows, heapRow{blocks, sz, dead})
			names = append(names, fmt.Sprintf("PE %d %s", p, kind))
			for _, b := range blocks {
				if b.Used {
					inUse[k] += b.Size
				}
			}
			size[k] += sz
		}
	}
	// Row 0 at the top: reverse, as a table reads.
	for i, j := 0, len(rows)-1; i < j; i, j = i+1, j-1 {
		rows[i], rows[j] = rows[j], rows[i]
		names[i], names[j] = names[j], names[i]
	}
	plt := plot.New()
	plt.Title.Text = fmt.Sprintf("job %s: symmetric heaps %s of %s in use, shared heaps %s of %s",
		ji.Job, segment.FormatSize(inUse[0]), segment.FormatSize(size[0]), segment.FormatSize(inUse[1]), segment.FormatSize(size[1]))
	plt.X.Label.Text = "bytes from the heap's start"
	plt.X.Tick.Marker = byteTicks{}
	plt.Add(rows)
	plt.NominalY(names...)
	plt.Legend.Top = true
	plt.Legend.Left = false
	for _, e := range []struct {
		name string
		col  color.Color
	}{{"used (alternating shades: neighbouring blocks)", mapUsed[0]}, {"free", mapFree}, {"PE dead", mapDead}} {
		plt.Legend.Add(e.name, swatch{e.col})
	}
	height := vg.Length(len(rows))*0.35*vg.Inch + 1.6*vg.Inch
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	var werr error
	if ext == ".svg" {
		c := vgsvg.New(10*vg.Inch, height)
		plt.Draw(draw.New(c))
		_, werr = c.WriteTo(f)
	} else {
		c := vgimg.New(10*vg.Inch, height)
		plt.Draw(draw.New(c))
		_, werr = vgimg.PngCanvas{Canvas: c}.WriteTo(f)
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	return werr
}

// swatch is a legend entry's coloured box.
type swatch struct{ col color.Color }

func (s swatch) Thumbnail(c *draw.Canvas) {
	c.FillPolygon(s.col, []vg.Point{{X: c.Min.X, Y: c.Min.Y}, {X: c.Max.X, Y: c.Min.Y}, {X: c.Max.X, Y: c.Max.Y}, {X: c.Min.X, Y: c.Max.Y}})
}
