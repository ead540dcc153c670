package main

import (
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// parseDuration is time.ParseDuration with an answer a person can act on: "30" is not taken
// as 30 of some unit the reader has to guess, it asks for one.
func parseDuration(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err == nil {
		return d, nil
	}
	if _, ferr := strconv.ParseFloat(s, 64); ferr == nil {
		return 0, fmt.Errorf("%q has no unit: add a unit, e.g. %ss", s, s)
	}
	return 0, errors.New("not a duration: write it like 30s, 1m or 1h30m")
}

// durationValue is a flag.Value for durations parsed by parseDuration. It keeps the text the
// user typed, so that answers about the value can speak in the user's unit.
type durationValue struct {
	d     *time.Duration
	typed string
}

func (v *durationValue) Set(s string) error {
	d, err := parseDuration(s)
	if err != nil {
		return err
	}
	*v.d, v.typed = d, s
	return nil
}

func (v *durationValue) String() string {
	if v.d == nil {
		return "0s"
	}
	return v.d.String()
}

// durationVar defines a duration flag like fs.DurationVar whose errors ask for a unit.
func durationVar(fs *flag.FlagSet, p *time.Duration, name string, def time.Duration, usage string) {
	*p = def
	fs.Var(&durationValue{d: p}, name, usage)
}

// duration defines a duration flag like fs.Duration whose errors ask for a unit.
func duration(fs *flag.FlagSet, name string, def time.Duration, usage string) *time.Duration {
	p := new(time.Duration)
	durationVar(fs, p, name, def, usage)
	return p
}

// typedDuration is the duration flag name of fs as the user typed it, or its value written
// by Go when the user gave none.
func typedDuration(fs *flag.FlagSet, name string) string {
	f := fs.Lookup(name)
	if f == nil {
		return ""
	}
	if v, ok := f.Value.(*durationValue); ok && v.typed != "" {
		return v.typed
	}
	return f.Value.String()
}

// units are the units time.ParseDuration reads.
var units = map[string]time.Duration{
	"ns": time.Nanosecond, "us": time.Microsecond, "µs": time.Microsecond, "μs": time.Microsecond,
	"ms": time.Millisecond, "s": time.Second, "m": time.Minute, "h": time.Hour,
}

// inUnitOf writes d in the last unit of typed ("1h30m": minutes), as the user would have
// written it ("60m", "1.5h"); when d is less than one of that unit or not a round number of it
// (to three decimals), in the largest unit it is a round number of.
func inUnitOf(d time.Duration, typed string) string {
	unit := typed[len(strings.TrimRight(typed, "nsuµμmh")):]
	if u, ok := units[unit]; ok && d >= u {
		if f := float64(d) / float64(u); f*1000 == float64(int64(f*1000)) {
			return strconv.FormatFloat(f, 'f', -1, 64) + unit
		}
	}
	for _, unit := range []string{"h", "m", "s", "ms", "µs"} {
		if d%units[unit] == 0 {
			return strconv.FormatInt(int64(d/units[unit]), 10) + unit
		}
	}
	return d.String()
}
