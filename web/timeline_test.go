package web

import (
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/net/html"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

func TestTimelineSVGGolden(t *testing.T) {
	// templ separates sibling elements with one space; a line break there is the same SVG and
	// gives the golden file readable diffs.
	got := strings.ReplaceAll(render(t, TimelineSVG(timeline())), "> <", ">\n<")
	path := filepath.Join("testdata", "timeline.golden.svg")
	if *update {
		if err := os.WriteFile(path, []byte(got+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./web -run Golden -update to create it)", err)
	}
	if diff := cmp.Diff(strings.TrimSuffix(string(want), "\n"), got); diff != "" {
		t.Errorf("TimelineSVG() differs from %s (-want +got):\n%s", path, diff)
	}
	if again := strings.ReplaceAll(render(t, TimelineSVG(timeline())), "> <", ">\n<"); again != got {
		t.Error("TimelineSVG() renders differently the second time")
	}
}

func TestTimelineSVGShapes(t *testing.T) {
	doc := parse(t, TimelineSVG(timeline()))
	grants := findAll(doc, func(n *html.Node) bool { return strings.HasPrefix(attr(n, "class"), "tl-grant ") })
	var got []string
	for _, g := range grants {
		got = append(got, attr(g, "data-token")+" "+attr(g, "class"))
	}
	want := []string{
		strconv.FormatInt(tok1, 10) + " tl-grant tl-released",
		strconv.FormatInt(tok2, 10) + " tl-grant tl-expired",
		strconv.FormatInt(tok3, 10) + " tl-grant tl-revoked",
		strconv.FormatInt(tok4, 10) + " tl-grant tl-held",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("grants (-want +got):\n%s", diff)
	}
	count := func(class string) int {
		return len(findAll(doc, func(n *html.Node) bool { return attr(n, "class") == class }))
	}
	for class, want := range map[string]int{
		"tl-hatch":              1, // only the expiry
		"tl-cap tl-cap-expired": 1,
		"tl-cap tl-cap-revoked": 1,
		"tl-expected":           1, // the held grant, dashed to its expiry
		"tl-delay":              1, // the lock delay after the expiry
		"tl-reject":             2,
		"tl-now":                1,
		"tl-label":              4,
		"tl-empty":              0,
		"tl-grant tl-released":  1,
		"tl-grant tl-held":      1,
		"tl-reject-x":           2,
	} {
		if got := count(class); got != want {
			t.Errorf("elements of class %q: %d, want %d", class, got, want)
		}
	}
	marks := findAll(doc, func(n *html.Node) bool { return attr(n, "class") == "tl-reject" })
	wantTitle := "rejected stale write to orders-db with token " + strconv.FormatInt(tok2, 10) +
		" (fence " + strconv.FormatInt(tok3, 10) + ") from worker-2@host-b at 2026-03-01 11:57:55.000 UTC"
	if got := text(byTag(marks[0], "title")[0]); got != wantTitle {
		t.Errorf("title of the first ✕ = %q, want %q", got, wantTitle)
	}
}

func TestTimelineSVGEmpty(t *testing.T) {
	doc := parse(t, TimelineSVG(Timeline{Name: "x", Start: at("-5m"), End: at("1m"), Now: now}))
	if got := texts(findAll(doc, func(n *html.Node) bool { return attr(n, "class") == "tl-empty" })); !cmp.Equal(got, []string{"No grant in this window"}) {
		t.Errorf("empty text = %q", got)
	}
}

func TestTimelineWindow(t *testing.T) {
	start, end := TimelineWindow(heldLease(), at("-6m"), 0, now)
	if want := at("-6m"); !start.Equal(want) {
		t.Errorf("TimelineWindow() start = %v, want %v", start, want)
	}
	// 6m30s from the first event to the expiry, plus a twentieth.
	if want := at("30s").Add(6*time.Minute/20 + 30*time.Second/20); !end.Equal(want) {
		t.Errorf("TimelineWindow() end = %v, want %v", end, want)
	}
	start, _ = TimelineWindow(Lease{}, at("-24h"), 0, now)
	if want := at("-6h"); !start.Equal(want) {
		t.Errorf("TimelineWindow(old history) start = %v, want %v", start, want)
	}
	start, _ = TimelineWindow(Lease{}, at("-24h"), 15*time.Minute, now)
	if want := at("-15m"); !start.Equal(want) {
		t.Errorf("TimelineWindow(15 min range) start = %v, want %v", start, want)
	}
	t.Run("EndedLeaseStopsAtNow", func(t *testing.T) {
		// A revoked lease's expiry was cancelled: the window must not stretch to it.
		l := heldLease()
		l.Held, l.Ended, l.EndedAt, l.ExpiresAt = false, "revoked", at("-1m"), at("8m")
		start, end := TimelineWindow(l, at("-2m"), 0, now)
		if want := now.Add(2 * time.Minute / 20); !end.Equal(want) || !start.Equal(at("-2m")) {
			t.Errorf("TimelineWindow(revoked) = %v – %v, want %v – %v", start, end, at("-2m"), want)
		}
	})
}

func TestTimelineStackedMarks(t *testing.T) {
	tl := timeline()
	tl.Rejections = nil
	for i := range 3 {
		tl.Rejections = append(tl.Rejections, Rejection{Resource: "db", PresentedToken: tok1, At: at("-30s").Add(time.Duration(i) * 100 * time.Millisecond)})
	}
	tl.Rejections = append(tl.Rejections, Rejection{Resource: "db", PresentedToken: tok2, At: at("-3m")})
	doc := parse(t, TimelineSVG(tl))
	marks := findAll(doc, func(n *html.Node) bool { return attr(n, "class") == "tl-reject" })
	if len(marks) != 2 {
		t.Fatalf("✕ marks = %d, want 2 (three close together drawn as one)", len(marks))
	}
	if got := texts(byTestID(doc, "reject-count")); !cmp.Equal(got, []string{"×3"}) {
		t.Errorf("counts = %q, want [×3]", got)
	}
	if got := text(one(t, doc, "timeline-zone")); got != "Mar 1, 2026 · times in UTC" {
		t.Errorf("zone = %q", got)
	}
}

// TestTimelineLabelsDoNotOverlap draws many short grants close together: labels must be cut
// or left out, never drawn over each other.
func TestTimelineLabelsDoNotOverlap(t *testing.T) {
	var grants []Grant
	for i := range 40 {
		from := at("-1m").Add(time.Duration(i) * 1500 * time.Millisecond)
		grants = append(grants, Grant{Token: tok1 + int64(i), Holder: "a-rather-long-holder-name-" + strconv.Itoa(i),
			AcquiredAt: from, EndedAt: from.Add(time.Second), End: "released"})
	}
	l := Timeline{Start: at("-1m"), End: now, Now: now, Grants: grants}.layout()
	type span struct{ from, to float64 }
	rows := map[string][]span{}
	labels := 0
	for _, g := range l.Grants {
		if g.Label == "" {
			continue
		}
		labels++
		x, _ := strconv.ParseFloat(g.LabelX, 64)
		rows[g.LabelY] = append(rows[g.LabelY], span{x, x + labelWidth(g.Label)})
	}
	if labels == 0 {
		t.Fatal("no label drawn")
	}
	for y, spans := range rows {
		for i := 1; i < len(spans); i++ {
			if spans[i].from < spans[i-1].to {
				t.Errorf("row y=%s: label %d at %.1f starts before label %d ends at %.1f", y, i, spans[i].from, i-1, spans[i-1].to)
			}
		}
	}
}

func TestTickStep(t *testing.T) {
	tests := []struct{ span, want time.Duration }{
		{5 * time.Second, time.Second},
		{time.Minute, 10 * time.Second},
		{6 * time.Minute, time.Minute},
		{15 * time.Minute, 2 * time.Minute},
		{24 * time.Hour, 3 * time.Hour},
		{90 * 24 * time.Hour, 14 * 24 * time.Hour},
	}
	for _, tt := range tests {
		if got := tickStep(tt.span); got != tt.want {
			t.Errorf("tickStep(%v) = %v, want %v", tt.span, got, tt.want)
		}
	}
}

// TestTimelineStretch: a grant a restart stretched has its stretched end outlined, from its
// expiry back by the stretch, with a tooltip that says by how much; other grants have none.
func TestTimelineStretch(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	tl := Timeline{Name: "job", Start: t0, End: t0.Add(100 * time.Second), Now: t0.Add(50 * time.Second), Grants: []Grant{
		{Token: 1, Holder: "a", AcquiredAt: t0, ExpiresAt: t0.Add(30 * time.Second), EndedAt: t0.Add(20 * time.Second), End: "released"},
		{Token: 2, Holder: "b", AcquiredAt: t0.Add(40 * time.Second), ExpiresAt: t0.Add(80 * time.Second), Stretched: 20 * time.Second},
	}}
	l := tl.layout()
	if len(l.Grants) != 2 || l.Grants[0].HasStretch {
		t.Fatalf("layout = %+v; want two grants, the first not stretched", l.Grants)
	}
	g := l.Grants[1]
	// The axis runs from x=12 to x=948 over 100 s: 9.36 per second; the stretch is 60 s to 80 s.
	if !g.HasStretch || g.Stretch.X != "573.6" || g.Stretch.W != "187.2" || !strings.Contains(g.Stretch.Title, "by 20 s") ||
		!strings.Contains(g.Class, "tl-stretched") || !strings.Contains(g.Title, "stretched it by 20 s") {
		t.Errorf("stretched grant = %+v; want its end from x=573.6, 187.2 wide, saying 20 s", g)
	}
}

// TestTimelineLanes: a semaphore's slots are drawn one lane each, overlapping grants apart, and
// what lies under the lanes moves down with them.
func TestTimelineLanes(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	tl := Timeline{Name: "pool", Start: t0, End: t0.Add(100 * time.Second), Now: t0.Add(50 * time.Second), Lanes: 3, Grants: []Grant{
		{Token: 1, Holder: "a", AcquiredAt: t0, ExpiresAt: t0.Add(80 * time.Second)},
		{Token: 2, Holder: "b", AcquiredAt: t0.Add(10 * time.Second), ExpiresAt: t0.Add(80 * time.Second), Lane: 1},
		{Token: 3, Holder: "c", AcquiredAt: t0.Add(20 * time.Second), ExpiresAt: t0.Add(80 * time.Second), Lane: 2},
	}}
	l := tl.layout()
	var ys, labels []string
	for _, g := range l.Grants {
		ys, labels = append(ys, g.Bar.Y), append(labels, g.Label+"@"+g.LabelY)
	}
	if diff := cmp.Diff([]string{"52.0", "92.0", "132.0"}, ys); diff != "" {
		t.Errorf("lanes' y (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"a #1@48.0", "b #2@88.0", "c #3@128.0"}, labels); diff != "" {
		t.Errorf("labels (-want +got):\n%s", diff)
	}
	if l.ViewBox != "0 0 960.0 222.0" || l.AxisY != "184.0" {
		t.Errorf("viewBox %q, axis at %s; want 80 more for two more lanes", l.ViewBox, l.AxisY)
	}
}

// TestTimelineFitRecent: a fitted window zooms in on the recent grants so that seconds-long
// ones beside an hour-long one are drawn wide enough to see; the hour-long one is then out of
// view and counted.
func TestTimelineFitRecent(t *testing.T) {
	long := Grant{Token: tok1, Holder: "slow", AcquiredAt: at("-2h"), EndedAt: at("-1h"), End: "released"}
	var grants = []Grant{long}
	for i := range 5 {
		from := at("-60s").Add(time.Duration(i) * 10 * time.Second)
		grants = append(grants, Grant{Token: tok2 + int64(i), Holder: "quick", AcquiredAt: from, EndedAt: from.Add(3 * time.Second), End: "released"})
	}
	full := Timeline{Start: at("-2h"), End: now.Add(5 * time.Second), Now: now, Grants: grants}
	widths := func(tl Timeline) []float64 {
		var out []float64
		for _, g := range tl.layout().Grants {
			w, _ := strconv.ParseFloat(g.Bar.W, 64)
			out = append(out, w)
		}
		return out
	}
	for _, w := range widths(full)[1:] {
		if w > tlMinBar {
			t.Fatalf("the fixture's short grants are %.1f wide over two hours, want slivers of at most %.1f", w, tlMinBar)
		}
	}
	fit := full.FitRecent()
	if !fit.Start.After(at("-1h")) || !fit.Start.Before(at("-60s")) || !fit.End.Equal(full.End) {
		t.Errorf("FitRecent() window = %v – %v, want from after the long grant's end to before the first short one, to %v", fit.Start, fit.End, full.End)
	}
	if fit.Hidden != 1 || !fit.Zoomed {
		t.Errorf("FitRecent() = zoomed %v, hidden %d; want zoomed, 1 hidden (the hour-long grant)", fit.Zoomed, fit.Hidden)
	}
	ws := widths(fit)
	if len(ws) != 5 {
		t.Fatalf("grants drawn after FitRecent() = %d, want the 5 short ones", len(ws))
	}
	for i, w := range ws {
		if w < tlMinVisible {
			t.Errorf("short grant %d is %.1f wide, want at least %.1f", i, w, tlMinVisible)
		}
	}
	// Grants all of one size, in a window that fits them, are already fine: the window stays.
	even := Timeline{Start: at("-70s"), End: now.Add(5 * time.Second), Now: now, Grants: grants[1:]}
	if got := even.FitRecent(); !got.Start.Equal(even.Start) || got.Hidden != 0 || got.Zoomed {
		t.Errorf("FitRecent() of even grants = start %v hidden %d, want the window unchanged", got.Start, got.Hidden)
	}
}

// TestTimelineNowSkipsLabels: the now line runs beside its word and across the lanes, never
// through a row of labels over them, with one lane or several.
func TestTimelineNowSkipsLabels(t *testing.T) {
	for _, lanes := range []int{1, 3} {
		tl := timeline()
		tl.Lanes = lanes
		l := tl.layout()
		if !l.HasNow || len(l.NowLines) == 0 {
			t.Fatalf("lanes %d: no now line", lanes)
		}
		var rows [][2]float64 // the label rows' extents: a baseline and 11 units of text above it
		for _, y := range []float64{tlLabelY0, tlLabelY1} {
			rows = append(rows, [2]float64{y - 11, y + 2})
		}
		for i := range lanes {
			y := tlLaneY + float64(i)*tlLaneStep - 4
			rows = append(rows, [2]float64{y - 11, y + 2})
		}
		for _, s := range l.NowLines {
			y1, _ := strconv.ParseFloat(s.Y1, 64)
			y2, _ := strconv.ParseFloat(s.Y2, 64)
			for _, r := range rows {
				if y1 < r[1] && y2 > r[0] {
					t.Errorf("lanes %d: now line %.1f–%.1f crosses the label row %.1f–%.1f", lanes, y1, y2, r[0], r[1])
				}
			}
		}
		last := l.NowLines[len(l.NowLines)-1]
		if last.Y2 != l.AxisY {
			t.Errorf("lanes %d: the now line ends at %s, want the axis at %s", lanes, last.Y2, l.AxisY)
		}
	}
}

// TestTimelineFitRecentHeldAhead: short grants just before a grant held for ten more minutes
// are not squeezed by its expected expiry: the window ends soon after now, and the held grant's
// dashed part runs to the right edge.
func TestTimelineFitRecentHeldAhead(t *testing.T) {
	grants := []Grant{
		{Token: tok1, Holder: "a", AcquiredAt: at("-3s"), EndedAt: at("-2s"), End: "expired"},
		{Token: tok2, Holder: "b", AcquiredAt: at("-2s"), EndedAt: at("-1500ms"), End: "released"},
		{Token: tok3, Holder: "c", AcquiredAt: at("-1500ms"), ExpiresAt: now.Add(10 * time.Minute)},
	}
	held := Lease{Held: true, ExpiresAt: now.Add(10 * time.Minute)}
	start, end := TimelineWindow(held, at("-3s"), 0, now)
	fit := Timeline{Start: start, End: end, Now: now, Grants: grants}.FitRecent()
	if !fit.Zoomed || !fit.End.Before(now.Add(time.Minute)) || fit.Hidden != 0 {
		t.Fatalf("FitRecent() = %v – %v, zoomed %v, hidden %d; want it to end within a minute of now, nothing hidden", fit.Start, fit.End, fit.Zoomed, fit.Hidden)
	}
	l := fit.layout()
	for i, g := range l.Grants[:2] {
		if w, _ := strconv.ParseFloat(g.Bar.W, 64); w < tlMinVisible {
			t.Errorf("short grant %d is %.1f wide, want at least %.1f", i, w, tlMinVisible)
		}
	}
	last := l.Grants[2]
	x, _ := strconv.ParseFloat(last.Expected.X, 64)
	w, _ := strconv.ParseFloat(last.Expected.W, 64)
	if !last.HasExpected || x+w < tlRight-0.5 {
		t.Errorf("the held grant's expected part ends at %.1f, want it to run to the right edge %.1f", x+w, tlRight)
	}
}
