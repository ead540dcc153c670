package handlers

import (
	"errors"
	"net/http"
	"strings"

	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"

	"github.com/leasekeeper/leasekeeper/lease"
	"github.com/leasekeeper/leasekeeper/wire"
)

// validationError translates a request validator error into a domain error.
func validationError(err error) error {
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return err
	}
	var route *routers.RouteError
	if errors.As(err, &route) {
		if errors.Is(err, routers.ErrMethodNotAllowed) {
			return lease.Errorf(wire.CodeMethodNotAllowed, "%s", route.Reason)
		}
		return lease.Errorf(lease.CodeNotFound, "%s", route.Reason)
	}
	var re *openapi3filter.RequestError
	if errors.As(err, &re) {
		if re.Parameter != nil {
			if re.Parameter.Name == "Fencing-Token" && errors.Is(re.Err, openapi3filter.ErrInvalidRequired) {
				return lease.Errorf(lease.CodePrecondition, "a fenced write needs a Fencing-Token header")
			}
			msg := "parameter " + re.Parameter.Name + " (" + re.Parameter.In + "): " + short(re.Err)
			return &lease.Error{Code: lease.CodeInvalid, Message: msg, Fields: []string{msg}}
		}
		if re.RequestBody != nil {
			msg := "body: " + short(re.Err)
			return &lease.Error{Code: lease.CodeInvalid, Message: msg, Fields: []string{msg}}
		}
		return lease.Errorf(lease.CodeInvalid, "%s", short(re.Err))
	}
	return lease.Errorf(lease.CodeInvalid, "%s", short(err))
}

// short keeps the first line of a validator message: the schema dump that follows is noise.
func short(err error) string {
	if err == nil {
		return "invalid"
	}
	msg := err.Error()
	if i := strings.Index(msg, "\n"); i >= 0 {
		msg = msg[:i]
	}
	return strings.TrimSpace(msg)
}
