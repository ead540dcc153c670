package wire

import (
	"net/http"

	"github.com/leasekeeper/leasekeeper/lease"
)

// statusOf is the one table from error code to HTTP status.
var statusOf = map[lease.Code]int{
	lease.CodeInvalid:            http.StatusBadRequest,
	lease.CodeNotFound:           http.StatusNotFound,
	lease.CodeHeld:               http.StatusConflict,
	lease.CodeLost:               http.StatusConflict,
	lease.CodeStale:              http.StatusConflict,
	lease.CodeNotIssued:          http.StatusConflict,
	lease.CodePrecondition:       http.StatusPreconditionRequired,
	lease.CodePreconditionFailed: http.StatusPreconditionFailed,
	lease.CodeTooManyWaiters:     http.StatusTooManyRequests,
	lease.CodeTooManyWatchers:    http.StatusTooManyRequests,
	lease.CodeTooLarge:           http.StatusRequestEntityTooLarge,
	lease.CodeForbidden:          http.StatusForbidden,
	CodeMethodNotAllowed:         http.StatusMethodNotAllowed,
	CodeRequestTimeout:           http.StatusRequestTimeout,
	CodeUnsupportedMediaType:     http.StatusUnsupportedMediaType,
	CodeHeaderTooLarge:           http.StatusRequestHeaderFieldsTooLarge,
	CodeCanceled:                 StatusClientClosed,
	lease.CodeUnavailable:        http.StatusServiceUnavailable,
	lease.CodeInternal:           http.StatusInternalServerError,
	lease.CodeUnauthenticated:    http.StatusUnauthorized,
	lease.CodeRateLimited:        http.StatusTooManyRequests,
	lease.CodeTooManyLeases:      http.StatusTooManyRequests,
	lease.CodeTooManySessions:    http.StatusTooManyRequests,
	lease.CodeQuotaExceeded:      http.StatusInsufficientStorage,
	lease.CodeNotHeld:            http.StatusConflict,
	lease.CodeSessionLost:        http.StatusConflict,
	lease.CodeLimitMismatch:      http.StatusConflict,
	lease.CodeSharedToken:        http.StatusConflict,

	lease.CodeWaitingUnsupported: http.StatusBadRequest,
}

// Codes of the HTTP layer, beside the domain's.
const (
	CodeMethodNotAllowed lease.Code = "method_not_allowed"
	CodeRequestTimeout   lease.Code = "request_timeout"
	// CodeUnsupportedMediaType is a JSON endpoint's body labelled as anything but JSON.
	CodeUnsupportedMediaType lease.Code = "unsupported_media_type"
	// CodeHeaderTooLarge is a request whose header fields are larger than the server takes.
	CodeHeaderTooLarge lease.Code = "header_too_large"
	// CodeCanceled is a request whose client left before the answer (e.g. a waiting acquire
	// given up). No client reads it: it exists for the access log and the metrics.
	CodeCanceled lease.Code = "canceled" // metrics.Canceled too
)

// StatusClientClosed is the status logged for a request whose client left (nginx's 499).
const StatusClientClosed = 499

// Status is the HTTP status that answers code, and whether the table has one.
func Status(code lease.Code) (int, bool) {
	status, ok := statusOf[code]
	return status, ok
}
