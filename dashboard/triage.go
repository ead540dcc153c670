package dashboard

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"time"

	"github.com/leasekeeper/leasekeeper/auth"
	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/web"
)

// waitingNames is an Acquirer that can say which names have acquires waiting (queue.Line).
type waitingNames interface {
	Waiting() map[string]int
}

// maxWaitingShown bounds the names the summary lists as waited for.
const maxWaitingShown = 10

// triage is the overview's summary of what the viewer may see under prefix: the store's counts
// over the viewer's scope, the refused writes among rej (the visible ones of the store's
// newest, newest first; full when the store had more), the waiting lines, and the server's
// start. It also marks the held rows that have a pending handover.
func (d *dashboard) triage(ctx context.Context, o *web.Overview, prefix string, check bool, rej []lease.Rejection, full bool) error {
	t := web.Triage{Held: o.HeldCount, Started: d.s.started, Epoch: d.s.epoch}
	var handovers []lease.Handover
	for _, p := range scopePrefixes(d.principalOf(ctx), prefix, check) {
		x, err := d.s.store.Triage(ctx, p, web.SoonWindow)
		if err != nil {
			return err
		}
		t.Soon += x.Soon
		t.Late += x.Late
		t.Stretched += x.Stretched
		handovers = append(handovers, x.Handovers...)
	}
	slices.SortStableFunc(handovers, func(a, b lease.Handover) int { return a.At.Compare(b.At) })
	for _, h := range handovers {
		t.Handovers = append(t.Handovers, viewHandover(h))
	}
	hour, day := o.Now.Add(-time.Hour), o.Now.Add(-24*time.Hour)
	for _, x := range rej {
		if x.At.After(hour) {
			t.RejectedHour++
		}
		if x.At.After(day) {
			t.RejectedDay++
		}
	}
	t.RejectedMore = full && len(rej) > 0 && rej[len(rej)-1].At.After(day)
	if l, ok := d.s.acquirer.(waitingNames); ok {
		who := d.principalOf(ctx)
		for name, n := range l.Waiting() {
			base, _, _ := lease.SlotOf(name)
			if strings.HasPrefix(name, prefix) && who.Allow(auth.Read, base) == nil {
				t.Waiters += n
				t.Waiting = append(t.Waiting, web.Waiting{Name: base, Waiters: n})
			}
		}
		slices.SortFunc(t.Waiting, func(a, b web.Waiting) int {
			return cmp.Or(cmp.Compare(b.Waiters, a.Waiters), cmp.Compare(a.Name, b.Name))
		})
		t.Waiting = t.Waiting[:min(len(t.Waiting), maxWaitingShown)]
	}
	o.Triage = t
	for i := range o.Held {
		for j := range o.Triage.Handovers {
			if o.Triage.Handovers[j].Name == o.Held[i].Name {
				o.Held[i].Handover = &o.Triage.Handovers[j]
				break
			}
		}
	}
	return nil
}

// viewHandover is a handover request for the pages; a slot's request is its semaphore's.
func viewHandover(h lease.Handover) web.Handover {
	name, _, _ := lease.SlotOf(h.Name)
	return web.Handover{Name: name, Holder: h.Holder, Token: h.Token, To: h.To, Reason: h.Reason, By: h.By, At: h.At}
}

// scopePrefixes are the prefixes to ask the store for the leases under prefix that who may see:
// prefix itself when the scope needs no check, else the key's prefixes under it, none of them
// under another (so that nothing is counted twice).
func scopePrefixes(who auth.Principal, prefix string, check bool) []string {
	if !check {
		return []string{prefix}
	}
	var out []string
	for _, kp := range who.Prefixes {
		if strings.HasPrefix(kp, prefix) {
			out = append(out, kp)
		}
	}
	slices.Sort(out)
	kept := out[:0]
	for _, p := range out {
		if len(kept) == 0 || !strings.HasPrefix(p, kept[len(kept)-1]) {
			kept = append(kept, p)
		}
	}
	return kept
}

// leaseHandover is the pending handover request of the lease named name (of one of its slots,
// for a semaphore), or nil.
func (d *dashboard) leaseHandover(ctx context.Context, name string) (*web.Handover, error) {
	x, err := d.s.store.Triage(ctx, name, 0)
	if err != nil {
		return nil, err
	}
	for _, h := range x.Handovers {
		if v := viewHandover(h); v.Name == name {
			return &v, nil
		}
	}
	return nil, nil
}
