package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/leasekeeper/leasekeeper/client"
)

// parseFlags parses args with fs. The help the user asked for (-h, --help) goes to stdout
// (exit 0); a usage error is only the error (exit 2), which main prints to stderr with a
// pointer to the help, as the usual tools do. fs's Usage must write to fs.Output().
func parseFlags(fs *flag.FlagSet, args []string, stdout io.Writer) error {
	var buf bytes.Buffer
	fs.SetOutput(&buf)
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		if _, werr := stdout.Write(buf.Bytes()); werr != nil {
			return werr
		}
		return &exitError{code: 2, err: err}
	case err != nil:
		return &exitError{code: 2, err: fmt.Errorf("%s: %w", fs.Name(), err)}
	}
	return nil
}

// outOfBoundsRE matches the rule the server states for a duration outside its bounds, in
// milliseconds: "ttl_ms: ttl_ms 360000000 is outside [1000, 3600000]".
var outOfBoundsRE = regexp.MustCompile(`^(\w+)_ms: \w+ (-?\d+) is outside \[(-?\d+), (-?\d+)\]$`)

// inUserUnits rewords the server's refusal of a duration flag outside its bounds in the unit
// the user typed ("ttl 100h exceeds the maximum 1h"), as a usage error. Other errors are
// returned as they are.
func inUserUnits(err error, fs *flag.FlagSet) error {
	var ae *client.APIError
	if !errors.As(err, &ae) || !errors.Is(ae, client.ErrInvalid) {
		return err
	}
	var msgs []string
	for _, rule := range ae.Errors {
		m := outOfBoundsRE.FindStringSubmatch(rule)
		if m == nil {
			continue
		}
		name := strings.ReplaceAll(m[1], "_", "-")
		typed := typedDuration(fs, name)
		if typed == "" {
			continue
		}
		ms := func(s string) time.Duration {
			n, _ := strconv.ParseInt(s, 10, 64)
			return time.Duration(n) * time.Millisecond
		}
		got, lo, hi := ms(m[2]), ms(m[3]), ms(m[4])
		what := strings.ReplaceAll(m[1], "_", " ")
		switch {
		case got > hi:
			msgs = append(msgs, fmt.Sprintf("%s %s exceeds the maximum %s", what, typed, inUnitOf(hi, typed)))
		case got < lo:
			msgs = append(msgs, fmt.Sprintf("%s %s is below the minimum %s", what, typed, inUnitOf(lo, typed)))
		}
	}
	if len(msgs) == 0 {
		return err
	}
	return &exitError{code: 2, err: fmt.Errorf("%s: %s (the server's bounds)", fs.Name(), strings.Join(msgs, "; "))}
}
