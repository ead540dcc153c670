// Package fence helps a resource of your own check leasekeeper fencing tokens.
//
// A lease alone does not make a write safe: its holder can pause (garbage
// collection, a stalled VM, a slow network), lose the lease to someone else
// and then resume and write as if it still held it. leasekeeper gives every
// grant a fencing token larger than every token issued before. The resource
// keeps, per key, the largest token it has accepted (its fence) and refuses
// any write whose token is lower. This package does that check for two kinds
// of resource: a SQL table, and an HTTP service.
//
// # The rule, and why it is safe
//
// A write with token t to key k applies if and only if t >= fence(k), and
// the same write sets fence(k) = t. Two details make this safe:
//
//   - The comparison is <=, not <. The holder of a lease writes many times
//     with one token, so a token equal to the fence is the current holder
//     writing again and must be accepted. Only a token strictly below the
//     fence belongs to a holder that has been superseded.
//
//   - The check and the write happen in one statement (or one transaction).
//     If the fence were read first and written later, a newer holder could
//     raise the fence in between and the old holder's write would land on top
//     of it: exactly the race fencing exists to stop.
//
// A single conditional statement such as
//
//	UPDATE t SET v = $1, fence = $2 WHERE key = $3 AND fence <= $2
//
// is evaluated by the database under the row's write lock, so a stale write
// changes no row and reports zero rows affected.
//
// A row that does not exist has no fence, so any token may create it. Do not
// DELETE fenced rows: a stale writer could then recreate one. Mark them
// deleted instead, keeping the fence.
//
// # SQL
//
// [Exec] runs a conditional statement that you write and turns "zero rows
// affected" into a *[StaleTokenError] (errors.Is(err, [ErrStaleToken]) holds), or
// into [ErrNoRow] when the key has no row at all. It works with any driver
// whose RowsAffected counts matched rows (see [Exec] for the MySQL caveat).
//
// [Table] covers the common case of a table with a key column and a fence
// column: it builds the guarded statements itself from validated, quoted
// identifiers and passes every value as a bind parameter. [Table.Update]
// needs the row to exist; [Table.Upsert] creates it when it is missing
// (INSERT … ON CONFLICT … DO UPDATE … WHERE fence <= excluded.fence, for
// SQLite ≥ 3.24 and PostgreSQL ≥ 9.5).
//
// # HTTP
//
// [Middleware] reads the Fencing-Token header of unsafe requests (POST, PUT,
// PATCH, DELETE), checks and raises a per-key high-water mark ([HighWater];
// [Memory] is an in-memory one) and answers RFC 9457 problem+json: 428
// precondition_required without a token, 400 invalid_request for a malformed
// one, 409 stale_token for a stale one. Accepted requests carry their token
// in the request context ([TokenFromContext]).
//
// The middleware checks and raises the mark before the handler runs; it does
// not make the handler's own write conditional. Two requests with tokens 5
// and 6 may both pass the check (5 first) and the handler for 5 may still
// finish last. Either fence the handler's write as well (with [Table], for
// instance, passing the token from the context), or use the [Serialize]
// option, which runs the check and the handler for a key one request at a
// time within this process.
//
// # Readers' tokens
//
// A shared (read) lease's token is a fencing token like any other, and may
// well be above the fence; leasekeeper refuses it on its own resources
// (shared_token) because readers do not write. The helpers refuse it the same
// way when given a [Modes] that tells a reader's token from a writer's:
// [WithModes] for [Middleware], the Modes field of [Table] and [Write]. The
// Go client implements Modes by asking the server (GET /v1/tokens/{token});
// wrap it in a [ModeCache] (the client's Modes method does), since a token's
// mode never changes once issued: each token is asked once, and at most a
// bounded number are kept.
//
// A reader's token is then refused with a *[SharedTokenError]
// (errors.Is(err, [ErrSharedToken]); not [ErrStaleToken]), by the middleware
// as 409 shared_token, before any mark is raised or any statement sent, and
// passed to the OnReject callback with Code [CodeSharedToken]. The check fails
// closed: a token whose mode cannot be learned is refused with an error
// wrapping [ErrModeUnknown] (the middleware answers 503 unavailable when the
// lookup failed, 409 unknown_token when it knows no grant of the token,
// [ErrUnknownToken]); letting it through could let a reader write.
//
// # Reporting
//
// Every refusal can be passed to a callback of type func(context.Context,
// [Rejection]). [Reporter] sends rejections to leasekeeper's POST
// /v1/rejections so that the dashboard shows them; the Report method of an
// [Async] is such a callback that never blocks the request that was refused
// ([Async.Flush] waits for the reports in flight). The Go client's Reporter
// method returns a Reporter configured like the client.
//
// A write that has begun is finished and classified even when the caller's
// context ends meanwhile (a lease context ending as its lease is lost is the
// usual case): a refusal is always a *[StaleTokenError] and always reaches
// the callback, with a context that is not cancelled. The same error type,
// and the same [ErrStaleToken], come back from the client for writes that
// leasekeeper refused.
//
// The package imports only the standard library.
package fence
