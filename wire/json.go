package wire

import (
	"encoding/json"
	"net/http"
	"strconv"
	"unicode/utf8"

	"github.com/leasekeeper/leasekeeper/api"
	"github.com/leasekeeper/leasekeeper/wiretime"
)

// The answers of the hot routes (acquire, renew, a fenced write) are encoded here rather than by
// the strict server's json.Encoder, which reflects over the struct, calls each timestamp's
// MarshalJSON and then scans what it returned (BenchmarkLeaseAnswer measures both; the figures
// are in BENCHMARKS.md). The bytes are the ones
// json.Encoder writes for the same value (TestWireJSONMatchesEncodingJSON fills every field of
// the generated types, so a field added to openapi.yaml and not here fails it); the rare nested
// values (a handover, metadata) still go through encoding/json.

// LeaseAnswer is the 200 answer of acquire and renew.
type LeaseAnswer struct{ Body api.Lease }

// VisitAcquireLeaseResponse writes the answer of an acquire.
func (a LeaseAnswer) VisitAcquireLeaseResponse(w http.ResponseWriter) error { return a.write(w) }

// VisitRenewLeaseResponse writes the answer of a renewal.
func (a LeaseAnswer) VisitRenewLeaseResponse(w http.ResponseWriter) error { return a.write(w) }

func (a LeaseAnswer) write(w http.ResponseWriter) error {
	b, err := appendLease(make([]byte, 0, 512), &a.Body)
	if err != nil {
		return err
	}
	h := w.Header()
	h["Content-Type"] = []string{"application/json"}
	h["Fencing-Token"] = []string{strconv.FormatInt(a.Body.Token, 10)}
	w.WriteHeader(http.StatusOK)
	_, err = w.Write(b)
	return err
}

// ResourceAnswer is the 200 or 201 answer of a fenced write.
type ResourceAnswer struct {
	Body           api.ResourceInfo
	ETag, Location string // Location: on the write that created the resource, which answers 201
}

// VisitPutResourceResponse writes the answer of a fenced write.
func (a ResourceAnswer) VisitPutResourceResponse(w http.ResponseWriter) error {
	b := appendResource(make([]byte, 0, 256), &a.Body)
	h := w.Header()
	h["Content-Type"] = []string{"application/json"}
	h["Etag"] = []string{a.ETag}
	status := http.StatusOK
	if a.Location != "" {
		h["Location"] = []string{a.Location}
		status = http.StatusCreated
	}
	w.WriteHeader(status)
	_, err := w.Write(b)
	return err
}

// appendLease appends l as json.Encoder encodes it, newline included.
func appendLease(b []byte, l *api.Lease) (_ []byte, err error) {
	b = appendTimeField(b, '{', "acquired_at", l.AcquiredAt)
	b = appendTimeField(b, ',', "expires_at", l.ExpiresAt)
	if l.ExtendedByRestartMs != nil {
		b = appendIntField(b, "extended_by_restart_ms", *l.ExtendedByRestartMs)
	}
	if l.HandoverRequested != nil {
		if b, err = appendMarshaled(b, "handover_requested", l.HandoverRequested); err != nil {
			return nil, err
		}
	}
	b = appendStringField(b, "holder", l.Holder)
	if l.LeaseId != nil {
		b = appendStringField(b, "lease_id", *l.LeaseId)
	}
	if l.Limit != nil {
		b = appendIntField(b, "limit", int64(*l.Limit))
	}
	b = appendIntField(b, "lock_delay_ms", l.LockDelayMs)
	if l.Metadata != nil {
		if b, err = appendMarshaled(b, "metadata", l.Metadata); err != nil {
			return nil, err
		}
	}
	if l.Mode != nil {
		b = appendStringField(b, "mode", string(*l.Mode))
	}
	b = appendStringField(b, "name", l.Name)
	b = appendTimeField(b, ',', "renewed_at", l.RenewedAt)
	if l.ServerEpoch != nil {
		b = appendStringField(b, "server_epoch", *l.ServerEpoch)
	}
	if l.Session != nil {
		b = appendStringField(b, "session", *l.Session)
	}
	if l.Slot != nil {
		b = appendIntField(b, "slot", int64(*l.Slot))
	}
	b = appendIntField(b, "token", l.Token)
	b = appendIntField(b, "ttl_ms", l.TtlMs)
	return append(b, "}\n"...), nil
}

// appendResource appends r as json.Encoder encodes it, newline included.
func appendResource(b []byte, r *api.ResourceInfo) []byte {
	b = append(b, '{')
	b = appendString(append(b, `"content_type":`...), r.ContentType)
	b = appendIntField(b, "fence", r.Fence)
	if r.Holder != nil {
		b = appendStringField(b, "holder", *r.Holder)
	}
	if r.Lease != nil {
		b = appendStringField(b, "lease", *r.Lease)
	}
	b = appendStringField(b, "resource", r.Resource)
	b = appendIntField(b, "size", r.Size)
	b = appendTimeField(b, ',', "updated_at", r.UpdatedAt)
	b = appendIntField(b, "version", r.Version)
	return append(b, "}\n"...)
}

// The field appenders take names that need no escaping.

// appendMarshaled appends a field whose value encoding/json encodes (as json.Encoder would,
// HTML escaping on).
func appendMarshaled(b []byte, name string, v any) ([]byte, error) {
	enc, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	b = append(append(append(b, ',', '"'), name...), '"', ':')
	return append(b, enc...), nil
}

func appendTimeField(b []byte, sep byte, name string, t wiretime.Time) []byte {
	b = append(append(append(b, sep, '"'), name...), `":"`...)
	return append(t.UTC().AppendFormat(b, wiretime.Layout), '"')
}

func appendIntField(b []byte, name string, v int64) []byte {
	b = append(append(append(b, ',', '"'), name...), '"', ':')
	return strconv.AppendInt(b, v, 10)
}

func appendStringField(b []byte, name, v string) []byte {
	b = append(append(append(b, ',', '"'), name...), '"', ':')
	return appendString(b, v)
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string exactly as encoding/json does with HTML escaping on
// (its default, and json.Encoder's): <, > and & as \u escapes, the line and paragraph
// separators escaped, and each byte of invalid UTF-8 as U+FFFD.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(append(b, s[start:i]...), `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(append(b, s[start:i]...), '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	return append(append(b, s[start:]...), '"')
}
