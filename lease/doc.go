// Package lease is the domain of leasekeeper: what a lease is, the rules a name, holder, ttl and
// metadata must follow, the errors every part of the service speaks, the server clock and the
// fencing-token rule. It does no I/O and imports only the standard library.
//
// A lease is a wall-clock bet on how long a process may pause. The fencing token makes the bet
// safe: every grant carries a token strictly greater than every token issued before it, and a
// resource that remembers the highest token it has seen refuses writes that carry a lower one.
package lease
