package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/leasekeeper/leasekeeper/client"
)

// leaderView is one line of `leasekeeper leader`: who leads an election (the holder of its
// lease), or that nobody does.
type leaderView struct {
	Name     string         `json:"name"`
	Leading  bool           `json:"leading"`
	Holder   string         `json:"holder,omitempty"`
	Token    int64          `json:"token,omitempty"`
	Since    *time.Time     `json:"since,omitempty"`
	Metadata map[string]any `json:"metadata,omitempty"`
	// Ended says how the last term ended when nobody leads.
	Ended string `json:"ended,omitempty"`
}

func (v leaderView) write(w io.Writer, asJSON bool) error {
	if asJSON {
		return json.NewEncoder(w).Encode(v)
	}
	if !v.Leading {
		msg := "no leader"
		if v.Ended != "" {
			msg += fmt.Sprintf(" (last: %s, token %d, %s)", v.Holder, v.Token, v.Ended)
		}
		_, err := fmt.Fprintln(w, msg)
		return err
	}
	line := fmt.Sprintf("leader %s token=%d", v.Holder, v.Token)
	if v.Since != nil {
		line += " since=" + v.Since.Format(time.RFC3339Nano)
	}
	if len(v.Metadata) > 0 {
		md, _ := json.Marshal(v.Metadata)
		line += " metadata=" + string(md)
	}
	_, err := fmt.Fprintln(w, line)
	return err
}

// leaderCommand prints who leads the election on a name and, with --watch, follows changes
// until interrupted.
func leaderCommand(ctx context.Context, cf *clientFlags, args []string, stdout io.Writer) error {
	follow := cf.fs.Bool("watch", false, "keep printing a line at every change of leader")
	name, err := cf.parse(args, new(string))
	if err != nil {
		return err
	}
	c, err := cf.client(nil)
	if err != nil {
		return err
	}
	if !*follow {
		return printLeader(ctx, c, name, stdout, cf.json)
	}
	return watchLeader(ctx, c, name, cf.json, stdout)
}

// printLeader prints who leads the election on name now.
func printLeader(ctx context.Context, c *client.Client, name string, w io.Writer, asJSON bool) error {
	st, err := c.Get(ctx, name)
	if errors.Is(err, client.ErrNotFound) {
		return leaderView{Name: name}.write(w, asJSON)
	}
	if err != nil {
		return cliError(err)
	}
	v := leaderView{Name: name, Leading: st.Held, Holder: st.Holder, Token: st.Token, Metadata: st.Metadata}
	if st.Held {
		v.Since = &st.AcquiredAt
	} else {
		v.Ended = st.End
	}
	return v.write(w, asJSON)
}

// watchLeader prints who leads the election on name, then a line at every change, until ctx
// ends (nil: the normal way to stop).
func watchLeader(ctx context.Context, c *client.Client, name string, asJSON bool, stdout io.Writer) error {
	// The state is printed each time the stream (re)opens, before its events, so no change
	// falls between the two.
	var printed bool
	err := c.Follow(ctx, name, func() error {
		if printed {
			return nil
		}
		printed = true
		return printLeader(ctx, c, name, stdout, asJSON)
	}, func(e client.Event) error {
		if e.Name != name {
			return nil
		}
		switch e.Type {
		case "acquired":
			at := e.At
			return leaderView{Name: name, Leading: true, Holder: e.Holder, Token: e.Token, Since: &at, Metadata: e.Metadata}.write(stdout, asJSON)
		case "released", "expired", "revoked":
			return leaderView{Name: name, Holder: e.Holder, Token: e.Token, Ended: e.Type}.write(stdout, asJSON)
		}
		return nil
	})
	var ee *exitError
	switch {
	case ctx.Err() != nil:
		return nil // interrupted: the normal way to stop following
	case errors.As(err, &ee):
		return err
	}
	return cliError(err)
}
