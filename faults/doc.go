// Package faults holds the fault suite of leasekeeper: tests that break the real server the way
// production does (kill -9, power loss, pauses, clock offsets) and check from outside, through
// the HTTP API only, that every acknowledged operation survived and tokens kept growing.
// It has no code of its own; see FAULTS.md at the repository root.
package faults
