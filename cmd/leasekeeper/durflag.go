package main

import (
	"errors"
	"flag"
	"fmt"
	"strconv"
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

// durationValue is a flag.Value for durations parsed by parseDuration.
type durationValue time.Duration

func (d *durationValue) Set(s string) error {
	v, err := parseDuration(s)
	if err != nil {
		return err
	}
	*d = durationValue(v)
	return nil
}

func (d *durationValue) String() string { return time.Duration(*d).String() }

// durationVar defines a duration flag like fs.DurationVar whose errors ask for a unit.
func durationVar(fs *flag.FlagSet, p *time.Duration, name string, def time.Duration, usage string) {
	*p = def
	fs.Var((*durationValue)(p), name, usage)
}

// duration defines a duration flag like fs.Duration whose errors ask for a unit.
func duration(fs *flag.FlagSet, name string, def time.Duration, usage string) *time.Duration {
	p := new(time.Duration)
	durationVar(fs, p, name, def, usage)
	return p
}
