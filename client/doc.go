// Package client is the Go client of leasekeeper: acquire, renew and release leases, keep them
// alive, and know — before the server does — when a lease can no longer be relied on.
//
//	c, err := client.New("https://leasekeeper.internal:8080", client.WithAPIKey(key))
//	defer c.Close()
//	err = client.Do(ctx, c, "billing-nightly", client.AcquireOptions{TTL: 15 * time.Second},
//		func(ctx context.Context, token int64) error {
//			// work under ctx; send token with every write
//		})
//
// The client is explicit about its configuration: it reads no environment variable. The
// leasekeeper command reads LEASEKEEPER_SERVER and LEASEKEEPER_API_KEY and passes them to
// New and WithAPIKey; programs should do the same with their own configuration. TLS takes
// WithTLSConfig or WithCAFile. Its imports stay light: the generated wire types and
// client, and the standard library, but none of the server's dependencies.
//
// # The safety argument
//
// A lease is a bet on time, and the client and the server keep time apart. The client ends a
// lease's Context by its own monotonic clock, at
//
//	deadline = (time the acquire or last successful renewal was SENT) + ttl − safety margin
//
// and moves it only after a renewal succeeds. Why each term:
//
//   - The send time, not the answer's arrival. The server grants (or renews) when the request
//     reaches it, which is after it was sent, and the lease then lasts ttl by the server's
//     clock. Measuring from the send time therefore never ends later than the server's expiry,
//     however long the request and the answer took. Measuring from the arrival of the answer
//     would give away the whole round trip; using the server's expires_at would mix two clocks.
//     When an acquire is retried with the same Idempotency-Key, the send time of the first
//     attempt counts, since the grant a retry returns may have been made for it.
//   - The margin. The two clocks may run at slightly different rates, the server measures in
//     milliseconds, and work needs time to notice that its context ended and stop. The margin
//     (default a tenth of the ttl, see WithSafetyMargin) covers these; make it larger for work
//     that checks its context rarely.
//   - Monotonic time. The client never reads the wall clock for a deadline, so an NTP step or
//     date -s on the client changes nothing (the server does the same, invariant 4).
//   - A refused renewal (lease_lost: revoked, expired, superseded) ends the context at once,
//     and a renewal that keeps failing (network outage) lets the context end at the deadline:
//     the holder stops first, before anybody else can be granted the name (invariant 9).
//   - A kept-alive lease also follows its name on the server's watch stream, so a revoke or
//     a successor's grant ends the context within moments, not at the next renewal. All the
//     leases of a Client share one stream (the server bounds the streams a key may open). The
//     stream only ever ends a context sooner; without it, renewals guard the lease alone.
//
// # Why fencing tokens are still needed
//
// None of this stops a process that is paused after checking its context and before writing:
// a garbage-collection pause, a SIGSTOP, a swapped-out page or a slow network can hold a write
// back until after the lease has passed to someone else, and then the write lands as if the
// lease were still held. No lock service can prevent that from the outside. Every grant
// therefore carries a fencing token that only grows; send it with every write (Lease.Token,
// the token argument of Do, PutResource), and let the resource refuse tokens below the highest
// one it has seen. The context makes overlap rare; the token makes it harmless.
//
// # Locks, elections and sessions
//
// For those who know etcd's concurrency package or Consul's api: Client.NewMutex is a lock
// (Lock, TryLock, Unlock, and Locker for a sync.Locker), Client.NewElection a candidate
// (Campaign, Resign, Proclaim, Observe, and Run for a loop with callbacks), and a Session
// holds many leases with one keepalive; Session.NewMutex and Session.NewElection hold theirs
// under it, as etcd's NewMutex(session, pfx) and NewElection(session, pfx) do:
//
//	m := c.NewMutex("billing-nightly", client.AcquireOptions{TTL: 15 * time.Second})
//	if err := m.Lock(ctx); err != nil { … }
//	// work under m.Lease().Context(); send m.Token() with every write
//	err = m.Unlock(ctx) // errors.Is(err, client.ErrLeaseLost): the work may have overlapped
//
// Problem codes and event types have constants (CodeLimitMismatch, EventRevoked, …) to
// compare APIError.Code and Event.Type with.
//
// # Renewals and errors
//
// A held Lease renews itself at a fraction of its ttl (default 1/3, WithRenewFraction), with
// jittered retries on network errors. Release stops the renewals, ends the context, and
// releases the lease; it reports ErrLeaseLost when the lease had already been lost, so the
// caller learns its work may have overlapped another holder's. Do releases on every path,
// a panic included, and its error matches ErrLeaseLost whenever the lease was lost while
// its function ran, whatever the function returned. Client.Close stops every lease's
// renewals and watch but releases nothing (see Close).
//
// Acquire answers *HeldError (errors.Is ErrLeaseHeld) when somebody else holds the name.
// Requests that break the contract match ErrInvalid (names, holders and ttls are checked
// before sending, by the server's own rules) and are never retried; a server that cannot be
// reached, or answers 502, 503 or 504, matches ErrUnavailable. Other server answers are
// *APIError, matching ErrLeaseLost, ErrNotFound or ErrStaleToken by their code. A refused
// fenced write is a *StaleTokenError, the same type the fence package returns.
package client
