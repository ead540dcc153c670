package auth_test

import (
	"testing"

	"github.com/leasekeeper/leasekeeper/auth"
	"github.com/leasekeeper/leasekeeper/lease"
)

// TestSees checks what a key scoped to billing- sees of events, rejections and writes
// (invariant 8): only records whose every name is in its scope, and no lease or holder outside.
func TestSees(t *testing.T) {
	reader := auth.Principal{KeyID: "k1", Role: auth.Reader, Prefixes: []string{"billing-"}}
	for _, c := range []struct {
		e    lease.Event
		want bool
	}{
		{lease.Event{Type: lease.EventAcquired, Name: "billing-a"}, true},
		{lease.Event{Type: lease.EventAcquired, Name: "hr-a"}, false},
		{lease.Event{Type: lease.EventRejected, Name: "billing-a", Resource: "billing-r"}, true},
		{lease.Event{Type: lease.EventRejected, Name: "billing-a", Resource: "hr-r"}, false},
		{lease.Event{Type: lease.EventRejected, Name: "hr-a", Resource: "billing-r"}, false},
		{lease.Event{Type: lease.EventRejected, Resource: "billing-r"}, true},
		{lease.Event{Type: lease.EventKeyCreated, Name: "billing-a"}, false},
		{lease.Event{Type: lease.EventAcquired}, false},
	} {
		if got := reader.SeesEvent(c.e); got != c.want {
			t.Errorf("SeesEvent(%s %q on %q) = %v, want %v", c.e.Type, c.e.Name, c.e.Resource, got, c.want)
		}
	}
	if !admin.SeesEvent(lease.Event{Type: lease.EventKeyCreated}) {
		t.Error("an admin does not see a key's audit event")
	}
	for _, c := range []struct {
		r    lease.Rejection
		want bool
	}{
		{lease.Rejection{Resource: "billing-r"}, true},
		{lease.Rejection{Resource: "billing-r", Lease: "billing-a"}, true},
		{lease.Rejection{Resource: "billing-r", Lease: "hr-a"}, false},
		{lease.Rejection{Resource: "hr-r", Lease: "billing-a"}, false},
	} {
		if got := reader.SeesRejection(c.r); got != c.want {
			t.Errorf("SeesRejection(%q by %q) = %v, want %v", c.r.Resource, c.r.Lease, got, c.want)
		}
	}
	if l, h := reader.Attributed("hr-a", "alice"); l != "" || h != "" {
		t.Errorf("Attributed(hr-a, alice) = %q, %q, want both hidden", l, h)
	}
	if l, h := reader.Attributed("billing-a", "bob"); l != "billing-a" || h != "bob" {
		t.Errorf("Attributed(billing-a, bob) = %q, %q, want both", l, h)
	}
}

// TestListScope checks how a list under a prefix narrows to a key's scope.
func TestListScope(t *testing.T) {
	two := auth.Principal{KeyID: "k1", Role: auth.Reader, Prefixes: []string{"billing-", "bill-"}}
	narrowed, keep, none := two.ListScope("bil")
	if narrowed != "bil" || keep == nil || none {
		t.Fatalf("ListScope(bil) = %q, keep %v, none %v; want bil with a check", narrowed, keep != nil, none)
	}
	if !keep("billing-a") || !keep("", "bill-x") || keep("bilbo") || keep() {
		t.Error("keep does not follow the key's prefixes")
	}
	if narrowed, keep, none := two.ListScope("billing-x"); narrowed != "billing-x" || keep != nil || none {
		t.Errorf("ListScope(billing-x) = %q, %v, %v; want billing-x, no check", narrowed, keep != nil, none)
	}
	if _, _, none := two.ListScope("hr-"); !none {
		t.Error("ListScope(hr-) is not none")
	}
	if narrowed, keep, none := admin.ListScope("x"); narrowed != "x" || keep != nil || none {
		t.Errorf("admin ListScope(x) = %q, %v, %v", narrowed, keep != nil, none)
	}
}
