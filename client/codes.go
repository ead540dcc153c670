package client

// Problem codes: the stable Code of an *APIError, one for each way the server refuses a
// request (RFC 9457 problem+json). Compare APIError.Code with them, not with literals; the
// commonest ones also have a sentinel to test with errors.Is (ErrLeaseHeld, ErrLeaseLost,
// ErrNotFound, ErrStaleToken, ErrInvalid, ErrUnavailable).
const (
	CodeForbidden            = "forbidden"
	CodeHeaderTooLarge       = "header_too_large" // 431: a header field past the server's bound
	CodeInternal             = "internal"
	CodeInvalidRequest       = "invalid_request"
	CodeLeaseHeld            = "lease_held"
	CodeLeaseLost            = "lease_lost"
	CodeLimitMismatch        = "limit_mismatch" // a semaphore acquired with another limit than its holders'
	CodeMethodNotAllowed     = "method_not_allowed"
	CodeNotFound             = "not_found"
	CodeNotHeld              = "not_held" // a handover asked of a free name
	CodePayloadTooLarge      = "payload_too_large"
	CodePreconditionFailed   = "precondition_failed"
	CodePreconditionRequired = "precondition_required"
	CodeQuotaExceeded        = "quota_exceeded" // a key's resources at their quota (507)
	CodeRateLimited          = "rate_limited"
	CodeRequestTimeout       = "request_timeout"
	CodeSessionLost          = "session_lost"
	CodeSharedToken          = "shared_token" // a fenced write with a shared (read) grant's token
	CodeStaleToken           = "stale_token"
	CodeTokenNotIssued       = "token_not_issued"
	CodeTooManyLeases        = "too_many_leases"
	CodeTooManySessions      = "too_many_sessions"
	CodeTooManyWaiters       = "too_many_waiters"
	CodeTooManyWatchers      = "too_many_watchers"
	CodeUnauthenticated      = "unauthenticated"
	CodeUnavailable          = "unavailable"
	CodeUnsupportedMediaType = "unsupported_media_type" // 415: a JSON body labelled otherwise
	CodeWaitingUnsupported   = "waiting_unsupported"    // a server without a waiting line
)

// Event types: the Type of an Event on the watch stream or in a name's history.
const (
	EventAcquired          = "acquired"
	EventRenewed           = "renewed"
	EventReleased          = "released"
	EventExpired           = "expired" // its At is the moment the lease expired
	EventRevoked           = "revoked"
	EventRejected          = "rejected" // a fenced write refused; Event.Resource names the resource
	EventHandoverRequested = "handover_requested"
	EventResourceDeleted   = "resource_deleted"
	EventKeyCreated        = "key_created" // seen by admin keys only
	EventKeyRevoked        = "key_revoked" // seen by admin keys only
)
