package web

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Timeline is the props of the timeline picture on a lease's page: the grants of one name and
// the stale writes refused meanwhile, over the window from Start to End.
type Timeline struct {
	// Name is the lease name, used in the picture's accessible title.
	Name string
	// Start and End bound the window drawn; End not after Start draws one minute from Start.
	Start, End time.Time
	// Now is the time the page is rendered for: a held grant is drawn solid up to Now and
	// dashed from there to its expected expiry.
	Now time.Time
	// Grants are the grants, oldest first. Parts outside the window are clipped.
	Grants []Grant
	// Rejections are drawn as ✕ marks at their At.
	Rejections []Rejection
	// Lanes is how many rows of grants the picture has (a semaphore's slots, up to
	// [MaxLanes]); 0 or 1 for one.
	Lanes int
	// Zoomed says [Timeline.FitRecent] narrowed the window to the recent activity, and Hidden
	// counts the grants it left wholly before it; the page says so.
	Zoomed bool
	Hidden int
}

// MaxLanes bounds the rows of a timeline; grants of higher lanes share the last.
const MaxLanes = 16

// Grant is one grant of a name, that is one fencing token, from acquire to its end.
type Grant struct {
	Token  int64
	Holder string
	// AcquiredAt is when it was granted; zero when that is before the known history (it is
	// then drawn from the window's start).
	AcquiredAt time.Time
	// ExpiresAt is its last known expiry, set by the acquire or the latest renewal.
	ExpiresAt time.Time
	// EndedAt and End say when and how it ended: End is "released", "expired" or "revoked",
	// or empty when the way is not known; both are zero while it is held.
	EndedAt time.Time
	End     string
	// LockDelay is shaded after an expiry: the name is not granted again until EndedAt plus it.
	LockDelay time.Duration
	// Lane is the row it is drawn on, from 0 (a semaphore's slot); 0 for a plain lease.
	Lane int
	// Stretched is how much server restarts added to its expiry (invariant 5); the picture
	// marks the stretched end of the grant. Zero for a grant no restart stretched.
	Stretched time.Duration
}

// The ends of a grant the picture draws differently.
const (
	endExpired = "expired"
	endRevoked = "revoked"
)

// held reports whether g has not ended.
func (g Grant) held() bool { return g.End == "" && g.EndedAt.IsZero() }

// TimelineSpan is how far back a lease's timeline reaches by default.
const TimelineSpan = 6 * time.Hour

// TimelineRanges are the spans a lease page offers besides the default, by their query value.
var TimelineRanges = []struct {
	Value string
	Span  time.Duration
}{{"15m", 15 * time.Minute}, {"1h", time.Hour}, {"6h", 6 * time.Hour}, {"24h", 24 * time.Hour}}

// RangeSpan is the span of a range's query value, and false for an unknown one.
func RangeSpan(value string) (time.Duration, bool) {
	for _, r := range TimelineRanges {
		if r.Value == value {
			return r.Span, true
		}
	}
	return 0, false
}

// TimelineWindow suggests the window for a name's timeline. Without a span: from its oldest
// known event (at most TimelineSpan, at least one minute before now); with one, that span
// before now. It ends a little after the latest of now, a held lease's expiry and its
// available_at, so that a held lease's expected end is in view; an ended lease's cancelled
// expiry is not.
func TimelineWindow(l Lease, oldest time.Time, span time.Duration, now time.Time) (start, end time.Time) {
	end = now
	if l.Held && l.ExpiresAt.After(end) {
		end = l.ExpiresAt
	}
	if l.AvailableAt.After(end) {
		end = l.AvailableAt
	}
	if span > 0 {
		start = now.Add(-span)
	} else {
		start = now.Add(-time.Minute)
		if !oldest.IsZero() && oldest.Before(start) {
			start = oldest
		}
		if earliest := now.Add(-TimelineSpan); start.Before(earliest) {
			start = earliest
		}
	}
	end = end.Add(end.Sub(start) / 20)
	return start, end
}

// tlMinVisible is the narrowest, in viewBox units, that [Timeline.FitRecent] lets a grant be
// drawn at its true length; tlMinBar the narrowest any bar is drawn, whatever its length.
const (
	tlMinVisible = 8.0
	tlMinBar     = 4.0
)

// tlMinZoom is the narrowest window [Timeline.FitRecent] zooms to.
const tlMinZoom = 10 * time.Second

// FitRecent zooms a window fitted to the whole history in on the recent activity, so that a
// grant of seconds beside grants of an hour (past ones, or a held one's hour ahead) is not a
// sliver. The window starts just before the oldest of the newest grants that, drawn together,
// are each at least tlMinVisible wide (the newest grant always stays in), and ends a quarter of
// that span after now (a held grant's expected expiry further on runs off the right edge). It
// spans tlMinZoom at least, and the window is kept unless this cuts a fifth of it or more.
// Zoomed says the window changed, Hidden counts the grants left wholly before it; a longer
// range on the page shows them.
func (tl Timeline) FitRecent() Timeline {
	if len(tl.Grants) == 0 || !tl.End.After(tl.Start) {
		return tl
	}
	now := tl.Now
	if now.Before(tl.Start) || now.After(tl.End) {
		return tl
	}
	// endFor is the window's end for a window starting at s.
	endFor := func(s time.Time) time.Time {
		if e := now.Add(now.Sub(s) / 4); e.Before(tl.End) {
			return e
		}
		return tl.End
	}
	// extent is the part of g the picture draws in a window ending at e.
	extent := func(g Grant, e time.Time) (from, to time.Time) {
		from, to = g.AcquiredAt, g.EndedAt
		if from.IsZero() || from.Before(tl.Start) {
			from = tl.Start
		}
		if g.held() {
			to = e
			if !g.ExpiresAt.IsZero() && g.ExpiresAt.Before(to) {
				to = g.ExpiresAt
			}
		}
		if to.After(e) {
			to = e
		}
		return from, to
	}
	width := tlRight - tlLeft
	order := slices.Clone(tl.Grants)
	slices.SortStableFunc(order, func(a, b Grant) int { return a.AcquiredAt.Compare(b.AcquiredAt) })
	start, shortest := now, time.Duration(1<<63-1)
	for i := len(order) - 1; i >= 0; i-- {
		s := start
		if from, _ := extent(order[i], tl.End); from.Before(s) {
			s = from
		}
		e := endFor(s)
		from, to := extent(order[i], e)
		d := max(to.Sub(from), 0)
		// The margin before the oldest grant kept is a twentieth of the window.
		span := e.Sub(s) + e.Sub(s)/20
		if i < len(order)-1 && float64(min(shortest, d))/float64(span)*width < tlMinVisible {
			break
		}
		start, shortest = s, min(shortest, d)
	}
	end := endFor(start)
	start = start.Add(-end.Sub(start) / 20)
	if end.Sub(start) < tlMinZoom {
		start = end.Add(-tlMinZoom)
	}
	// A window not much narrower is left as it is: the picture does not jump for little.
	if end.Sub(start) > tl.End.Sub(tl.Start)*4/5 {
		return tl
	}
	if start.After(tl.Start) {
		tl.Start = start
	}
	tl.End, tl.Zoomed, tl.Hidden = end, true, 0
	for _, g := range tl.Grants {
		if _, to := extent(g, tl.End); to.Before(tl.Start) {
			tl.Hidden++
		}
	}
	return tl
}

// zoomNote says what a window zoomed by [Timeline.FitRecent] leaves out.
func zoomNote(tl Timeline) string {
	s := "Zoomed to recent activity so that short grants show"
	if tl.Hidden > 0 {
		s += " (" + plural(tl.Hidden, "earlier grant") + " out of view)"
	}
	return s + "; a longer range shows the whole history."
}

// The geometry of the picture, in viewBox units.
const (
	tlWidth     = 960.0
	tlHeight    = 142.0
	tlLeft      = 12.0
	tlRight     = tlWidth - 12.0
	tlLabelY0   = 30.0 // baseline of the first row of grant labels
	tlLabelY1   = 44.0 // and of the second
	tlLaneY     = 52.0
	tlLaneH     = 22.0
	tlMarkY     = 90.0 // centre of the ✕ marks
	tlAxisY     = 104.0
	tlTickLabel = 120.0
	tlZoneY     = 137.0        // baseline of the date and time zone under the axis
	tlCharW     = 6.5          // estimated width of one character of a label
	tlHatchW    = 10.0         // width of the hatched end of an expired grant
	tlLaneStep  = tlLaneH + 18 // from one lane to the next, with room for a row of labels
)

// tlLayout is a Timeline turned into shapes, every coordinate already formatted, so that the
// template only writes them out and the output is the same on every machine.
type tlLayout struct {
	ViewBox   string
	Title     string
	Empty     bool
	Grants    []tlGrant
	Delays    []tlBox
	Marks     []tlMark
	Ticks     []tlTick
	HasNow    bool
	NowX      string
	NowAnchor string
	// NowLines are the pieces of the now line: beside the "now" text, and across each lane
	// down to the axis, leaving out the rows of labels over the lanes.
	NowLines   []tlLine
	AxisFrom   string
	AxisTo     string
	EmptyTextX string
	// Zone is the date of the window and the time zone of the axis, e.g. "Nov 29, 2026 · UTC".
	Zone string
	// The heights of the axis, its ticks and labels and of the empty text: lower with more lanes.
	AxisY, TickY, TickLabelY, ZoneY, EmptyY string
}

type tlBox struct {
	X, Y, W, H string
	Title      string
}

type tlGrant struct {
	Class string
	Fill  string
	Title string
	Token string
	Bar   tlBox
	// Expected is the dashed box of a held grant from now to its expected expiry.
	HasExpected bool
	Expected    tlBox
	// Hatch is the hatched end of an expired grant.
	HasHatch bool
	Hatch    tlBox
	// Cap is the end line of an expired or revoked grant.
	HasCap   bool
	CapX     string
	CapY1    string
	CapY2    string
	CapClass string
	CapColor string
	// Stretch marks the end of the grant that a server restart added.
	HasStretch bool
	Stretch    tlBox
	// Label is the holder and token above the bar; empty when there is no room.
	Label  string
	LabelX string
	LabelY string
}

type tlMark struct {
	Title string
	// Count is the number of rejections drawn as this one ✕, shown beside it when above 1.
	Count  string
	CountX string
	Path   string
	X      string
	StemY1 string
	StemY2 string
	CountY string
}

type tlLine struct {
	Y1, Y2 string
}

type tlTick struct {
	X, Label, Anchor string
}

// f1 formats a coordinate with one decimal.
func f1(x float64) string { return strconv.FormatFloat(x, 'f', 1, 64) }

// layout turns tl into shapes.
func (tl Timeline) layout() tlLayout {
	start, end := tl.Start, tl.End
	if !end.After(start) {
		end = start.Add(time.Minute)
	}
	span := float64(end.Sub(start))
	xOf := func(t time.Time) float64 {
		x := tlLeft + float64(t.Sub(start))/span*(tlRight-tlLeft)
		return min(max(x, tlLeft), tlRight)
	}
	inWindow := func(t time.Time) bool { return !t.Before(start) && !t.After(end) }

	lanes := min(max(tl.Lanes, 1), MaxLanes)
	extra := float64(lanes-1) * tlLaneStep // everything under the lanes moves down by it
	laneY := func(g Grant) float64 { return tlLaneY + float64(min(max(g.Lane, 0), lanes-1))*tlLaneStep }
	markY := tlMarkY + extra
	sc := tlScale{start: start, end: end, lanes: lanes, extra: extra, xOf: xOf, laneY: laneY}
	out := tlLayout{
		ViewBox:    "0 0 " + f1(tlWidth) + " " + f1(tlHeight+extra),
		AxisFrom:   f1(tlLeft),
		AxisTo:     f1(tlRight),
		EmptyTextX: f1(tlWidth / 2),
		AxisY:      f1(tlAxisY + extra),
		TickY:      f1(tlAxisY + extra + 4),
		TickLabelY: f1(tlTickLabel + extra),
		ZoneY:      f1(tlZoneY + extra),
		EmptyY:     f1(tlLaneY + 15),
	}

	vis := sc.visible(tl, &out)
	sc.drawGrants(&out, vis)
	out.Empty = len(vis) == 0
	out.Marks = sc.marks(tl.Rejections, markY)
	sc.drawNow(&out, tl.Now)
	out.Ticks = sc.ticks()

	out.Zone = start.UTC().Format("Jan 2, 2006")
	if e := end.UTC().Format("Jan 2, 2006"); e != out.Zone {
		out.Zone += " – " + e
	}
	out.Zone += " · times in UTC"
	out.Title = fmt.Sprintf("Timeline of %s from %s to %s: %d grants, %d rejected writes",
		tl.Name, absTime(start), absTime(end), len(vis), countIn(tl.Rejections, inWindow))
	return out
}

// tlScale places a timeline's window and lanes on the picture.
type tlScale struct {
	start, end time.Time
	lanes      int
	extra      float64 // how far everything under the lanes moves down
	xOf        func(time.Time) float64
	laneY      func(Grant) float64
}

func (sc tlScale) inWindow(t time.Time) bool { return !t.Before(sc.start) && !t.After(sc.end) }

// tlVisible is a grant in the window.
type tlVisible struct {
	g          Grant
	from, to   time.Time // the solid part, clipped to the window
	xFrom, xTo float64
}

// visible returns the grants of tl in the window, in order; the lock delays of those outside
// it that reach into it go to out.
func (sc tlScale) visible(tl Timeline, out *tlLayout) []tlVisible {
	start, end, xOf, laneY := sc.start, sc.end, sc.xOf, sc.laneY
	var vis []tlVisible
	for _, g := range tl.Grants {
		from := g.AcquiredAt
		if from.IsZero() || from.Before(start) {
			from = start
		}
		to := g.EndedAt
		if g.held() {
			to = tl.Now
			if !g.ExpiresAt.IsZero() && g.ExpiresAt.Before(to) {
				to = g.ExpiresAt
			}
		}
		if to.After(end) {
			to = end
		}
		if to.Before(start) || from.After(end) || to.Before(from) {
			// Not in the window; its lock delay may still be.
			if g.End == endExpired && g.LockDelay > 0 {
				out.addDelay(g, xOf, start, end, laneY(g))
			}
			continue
		}
		vis = append(vis, tlVisible{g: g, from: from, to: to, xFrom: xOf(from), xTo: xOf(to)})
	}

	return vis
}

// drawGrants draws the visible grants, with their labels, expected expiries, restart stretches,
// ends and lock delays.
func (sc tlScale) drawGrants(out *tlLayout, vis []tlVisible) {
	end, xOf, laneY, lanes, inWindow := sc.end, sc.xOf, sc.laneY, sc.lanes, sc.inWindow
	start := sc.start
	rowEnd := [2]float64{-1e9, -1e9}
	for i, v := range vis {
		g := v.g
		y := laneY(g)
		w := max(v.xTo-v.xFrom, tlMinBar)
		lg := tlGrant{
			Class: "tl-grant tl-" + grantState(g),
			Fill:  "#4a7fb5",
			Title: grantTitle(g),
			Token: strconv.FormatInt(g.Token, 10),
			Bar:   tlBox{X: f1(v.xFrom), Y: f1(y), W: f1(w), H: f1(tlLaneH)},
		}
		if g.held() {
			lg.Fill = "#2e8b57"
		}
		if g.held() && g.ExpiresAt.After(v.to) && v.to.Before(end) {
			ex := xOf(g.ExpiresAt)
			lg.HasExpected = true
			lg.Expected = tlBox{X: f1(v.xTo), Y: f1(y), W: f1(max(ex-v.xTo, 1)), H: f1(tlLaneH),
				Title: "expected expiry " + absTime(g.ExpiresAt)}
		}
		if g.Stretched > 0 {
			lg.Class += " tl-stretched"
			to := g.ExpiresAt
			if !g.held() {
				to = g.EndedAt
			}
			x0, x1 := xOf(to.Add(-g.Stretched)), xOf(to)
			lg.HasStretch = true
			lg.Stretch = tlBox{X: f1(min(x0, x1-4)), Y: f1(y - 3), W: f1(max(x1-x0, 4)), H: f1(tlLaneH + 6),
				Title: "a server restart stretched this grant by " + FormatDuration(g.Stretched)}
		}
		endsInWindow := !g.held() && inWindow(g.EndedAt)
		if endsInWindow && g.End == endExpired {
			hw := min(tlHatchW, w)
			lg.HasHatch = true
			lg.Hatch = tlBox{X: f1(v.xFrom + w - hw), Y: f1(y), W: f1(hw), H: f1(tlLaneH)}
		}
		if endsInWindow && (g.End == endExpired || g.End == endRevoked) {
			lg.HasCap = true
			lg.CapX, lg.CapY1, lg.CapY2 = f1(v.xTo), f1(y-4), f1(y+tlLaneH+4)
			lg.CapClass = "tl-cap tl-cap-" + g.End
			lg.CapColor = "#c0392b"
			if g.End == endRevoked {
				lg.CapColor = "#d9822b"
			}
		}

		// Labels take two rows. A label is cut to end before the grant after next starts, so
		// the row used two grants ago is always free again (see the test of the layout).
		lx := v.xFrom + 2
		limit := tlRight
		if i+2 < len(vis) {
			limit = vis[i+2].xFrom
		}
		text := g.Holder + " #" + strconv.FormatInt(g.Token, 10)
		if lanes > 1 {
			// One row of labels over each lane, each cut before the next grant of its lane.
			limit = tlRight
			for _, nx := range vis[i+1:] {
				if laneY(nx.g) == y {
					limit = nx.xFrom
					break
				}
			}
			if text = labelFit(text, limit-lx-4); text != "" {
				lg.Label, lg.LabelX, lg.LabelY = text, f1(lx), f1(y-4)
			}
		} else if text = labelFit(text, limit-lx-4); text != "" {
			row := 0
			if rowEnd[0]+4 > lx {
				row = 1
			}
			rowEnd[row] = lx + labelWidth(text)
			lg.Label, lg.LabelX = text, f1(lx)
			lg.LabelY = f1([2]float64{tlLabelY0, tlLabelY1}[row])
		}
		out.Grants = append(out.Grants, lg)

		if g.End == endExpired && g.LockDelay > 0 {
			out.addDelay(g, xOf, start, end, y)
		}
	}
}

// marks draws the rejected writes in the window as ✕ marks at height markY.
func (sc tlScale) marks(rejections []Rejection, markY float64) []tlMark {
	xOf, inWindow, extra := sc.xOf, sc.inWindow, sc.extra
	var out []tlMark
	// Marks closer than a mark's width are drawn as one ✕ with their count beside it.
	const s = 4.0
	var groups [][]Rejection
	var groupX []float64
	for _, r := range sortedByTime(rejections) {
		if !inWindow(r.At) {
			continue
		}
		x := xOf(r.At)
		if n := len(groups); n > 0 && x-groupX[n-1] < 2*s+2 {
			groups[n-1] = append(groups[n-1], r)
			continue
		}
		groups = append(groups, []Rejection{r})
		groupX = append(groupX, x)
	}
	for i, g := range groups {
		x := groupX[i]
		titles := make([]string, len(g))
		for j, r := range g {
			titles[j] = rejectionTitle(r)
		}
		m := tlMark{
			Title: strings.Join(titles, "\n"),
			X:     f1(x),
			Path: "M" + f1(x-s) + " " + f1(markY-s) + "L" + f1(x+s) + " " + f1(markY+s) +
				"M" + f1(x+s) + " " + f1(markY-s) + "L" + f1(x-s) + " " + f1(markY+s),
			StemY1: f1(tlLaneY + extra + tlLaneH),
			StemY2: f1(markY - s - 2),
			CountY: f1(markY + 4),
		}
		if len(g) > 1 {
			m.Title = strconv.Itoa(len(g)) + " rejected stale writes:\n" + m.Title
			m.Count, m.CountX = "×"+strconv.Itoa(len(g)), f1(x+s+2)
		}
		out = append(out, m)
	}

	return out
}

// drawNow draws the line of now, if it is in the window, through the lanes but not their labels.
func (sc tlScale) drawNow(out *tlLayout, now time.Time) {
	xOf, inWindow, lanes, extra := sc.xOf, sc.inWindow, sc.lanes, sc.extra
	if inWindow(now) && !now.IsZero() {
		out.HasNow = true
		x := xOf(now)
		out.NowX = f1(x)
		out.NowAnchor = edgeAnchor(x)
		out.NowLines = append(out.NowLines, tlLine{Y1: f1(14), Y2: f1(tlLabelY0 - 11)})
		for i := range lanes {
			y := tlLaneY + float64(i)*tlLaneStep
			y2 := y + tlLaneH + 2
			if i == lanes-1 {
				y2 = tlAxisY + extra
			}
			out.NowLines = append(out.NowLines, tlLine{Y1: f1(y - 2), Y2: f1(y2)})
		}
	}

}

// ticks are the axis's ticks over the window, in UTC.
func (sc tlScale) ticks() []tlTick {
	start, end, xOf := sc.start, sc.end, sc.xOf
	var out []tlTick
	step := tickStep(end.Sub(start))
	layout := "15:04"
	switch {
	case step < time.Minute:
		layout = "15:04:05"
	case step >= 24*time.Hour:
		layout = "Jan 2"
	}
	for t := start.UTC().Truncate(step); !t.After(end); t = t.Add(step) {
		if t.Before(start) {
			continue
		}
		x := xOf(t)
		out = append(out, tlTick{X: f1(x), Label: t.Format(layout), Anchor: edgeAnchor(x)})
	}

	return out
}

// tlEllipsisW is the estimated width of the "…" that ends a cut label: about an em.
const tlEllipsisW = 11.0

// labelWidth estimates the width of a label, in viewBox units.
func labelWidth(s string) float64 {
	w := float64(utf8.RuneCountInString(s)) * tlCharW
	if strings.HasSuffix(s, "…") {
		w += tlEllipsisW - tlCharW
	}
	return w
}

// labelFit is s, cut with "…" to fit room (viewBox units) by labelWidth; "" when fewer than
// three characters would.
func labelFit(s string, room float64) string {
	for n := utf8.RuneCountInString(s); n >= 3; n-- {
		if t := truncate(s, n); labelWidth(t) <= room {
			return t
		}
	}
	return ""
}

// addDelay adds the shaded lock delay after g's expiry, if it reaches into the window.
func (l *tlLayout) addDelay(g Grant, xOf func(time.Time) float64, start, end time.Time, y float64) {
	from, to := g.EndedAt, g.EndedAt.Add(g.LockDelay)
	if to.Before(start) || from.After(end) {
		return
	}
	x0, x1 := xOf(from), xOf(to)
	l.Delays = append(l.Delays, tlBox{
		X: f1(x0), Y: f1(y), W: f1(max(x1-x0, 1)), H: f1(tlLaneH),
		Title: "lock delay " + FormatDuration(g.LockDelay) + " after the expiry of #" +
			strconv.FormatInt(g.Token, 10) + ": not granted again until " + absTime(to),
	})
}

// grantState is the CSS class suffix of a grant: held or how it ended.
func grantState(g Grant) string {
	switch {
	case g.held():
		return "held"
	case g.End == "":
		return "ended"
	default:
		return g.End
	}
}

// grantTitle is the tooltip of a grant.
func grantTitle(g Grant) string {
	s := "#" + strconv.FormatInt(g.Token, 10) + " held by " + g.Holder
	if !g.AcquiredAt.IsZero() {
		s += ", acquired " + absTime(g.AcquiredAt)
	}
	switch {
	case g.held():
		if !g.ExpiresAt.IsZero() {
			s += ", expires " + absTime(g.ExpiresAt)
		}
	case g.End == "":
		s += ", ended by " + absTime(g.EndedAt)
	default:
		s += ", " + g.End + " " + absTime(g.EndedAt)
	}
	if g.Stretched > 0 {
		s += "; a server restart stretched it by " + FormatDuration(g.Stretched)
	}
	return s
}

// rejectionTitle is the tooltip of a ✕ mark.
func rejectionTitle(r Rejection) string {
	s := "rejected stale write to " + r.Resource + " with token " + strconv.FormatInt(r.PresentedToken, 10)
	if r.CurrentFence != 0 {
		s += " (fence " + strconv.FormatInt(r.CurrentFence, 10) + ")"
	}
	if r.Holder != "" {
		s += " from " + r.Holder
	}
	return s + " at " + absTime(r.At)
}

// edgeAnchor keeps text near the picture's edges inside it.
func edgeAnchor(x float64) string {
	switch {
	case x < tlLeft+24:
		return "start"
	case x > tlRight-24:
		return "end"
	default:
		return "middle"
	}
}

// tickStep is the smallest of the usual axis intervals that puts at most 8 ticks on span.
func tickStep(span time.Duration) time.Duration {
	const day = 24 * time.Hour
	steps := [...]time.Duration{
		time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second, 15 * time.Second, 30 * time.Second,
		time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute, 15 * time.Minute, 30 * time.Minute,
		time.Hour, 2 * time.Hour, 3 * time.Hour, 6 * time.Hour, 12 * time.Hour, day, 2 * day, 7 * day,
	}
	for _, s := range steps {
		if span/s <= 8 {
			return s
		}
	}
	return 7 * day * (span/(8*7*day) + 1)
}

// sortedByTime is a copy of rs ordered by time.
func sortedByTime(rs []Rejection) []Rejection {
	out := append([]Rejection(nil), rs...)
	slices.SortStableFunc(out, func(a, b Rejection) int { return a.At.Compare(b.At) })
	return out
}

// countIn counts the rejections whose time in is true of.
func countIn(rs []Rejection, in func(time.Time) bool) int {
	n := 0
	for _, r := range rs {
		if in(r.At) {
			n++
		}
	}
	return n
}
