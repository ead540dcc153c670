package lease

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"
	"unicode"
	"unicode/utf8"
)

// Limits bound what a client can ask of the server. The zero value is not useful; start from
// DefaultLimits.
type Limits struct {
	MinTTL       time.Duration
	MaxTTL       time.Duration
	MaxWait      time.Duration
	MaxLockDelay time.Duration
}

// DefaultLimits are the bounds of docs/DESIGN.md: 1 s ≤ ttl ≤ 1 h, waits up to 5 min, lock delays
// up to 1 min.
func DefaultLimits() Limits {
	return Limits{MinTTL: time.Second, MaxTTL: time.Hour, MaxWait: 5 * time.Minute, MaxLockDelay: time.Minute}
}

// Sizes of things clients send.
const (
	MaxNameLen     = 200
	MaxHolderLen   = 256
	MaxMetadataLen = 4 << 10
	MaxValueLen    = 1 << 20
)

// ValidateName checks a lease or resource name: ^[A-Za-z0-9][A-Za-z0-9._:-]{0,199}$.
func ValidateName(name string) error {
	if name == "" {
		return invalid("name", "name is empty")
	}
	if len(name) > MaxNameLen {
		return invalid("name", "name is longer than %d characters", MaxNameLen)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if alnum || i > 0 && (c == '.' || c == '_' || c == ':' || c == '-') {
			continue
		}
		if i == 0 {
			return invalid("name", "name %q must start with a letter or digit", name)
		}
		return invalid("name", "name %q has %q at byte %d; allowed: letters, digits, '.', '_', ':', '-'", name, rune(c), i)
	}
	return nil
}

// ValidateHolder checks a holder: 1 to 256 characters of valid UTF-8 without control
// characters (C0, DEL, C1) nor invisible format characters (Unicode's Cf: zero-width spaces and
// joiners, bidirectional controls, the soft hyphen, the byte order mark…). A holder is read by
// people, on the dashboard, in the CLI and in logs; such characters would let one holder pass
// for another ("alice\u200b" for "alice", a right-to-left override reversing "tsoh-live") in
// every one of them, so they are refused here once rather than escaped in each view.
func ValidateHolder(holder string) error {
	n := utf8.RuneCountInString(holder)
	switch {
	case n == 0:
		return invalid("holder", "holder is empty")
	case n > MaxHolderLen:
		return invalid("holder", "holder is longer than %d characters", MaxHolderLen)
	case !utf8.ValidString(holder):
		return invalid("holder", "holder is not valid UTF-8")
	}
	for i, r := range holder {
		switch {
		case r < 0x20 || r >= 0x7f && r <= 0x9f:
			return invalid("holder", "holder has a control character")
		case r >= 0x80 && unicode.Is(unicode.Cf, r):
			return invalid("holder", "holder has the invisible format character U+%04X at byte %d", r, i)
		}
	}
	return nil
}

// ValidateTTL checks a ttl against the limits.
func (l Limits) ValidateTTL(ttl time.Duration) error {
	if ttl < l.MinTTL || ttl > l.MaxTTL {
		return invalid("ttl_ms", "ttl_ms %d is outside [%d, %d]", ttl.Milliseconds(), l.MinTTL.Milliseconds(), l.MaxTTL.Milliseconds())
	}
	return nil
}

// ValidateWait checks a wait against the limits.
func (l Limits) ValidateWait(wait time.Duration) error {
	if wait < 0 || wait > l.MaxWait {
		return invalid("wait_ms", "wait_ms %d is outside [0, %d]", wait.Milliseconds(), l.MaxWait.Milliseconds())
	}
	return nil
}

// ValidateLockDelay checks a lock delay against the limits.
func (l Limits) ValidateLockDelay(d time.Duration) error {
	if d < 0 || d > l.MaxLockDelay {
		return invalid("lock_delay_ms", "lock_delay_ms %d is outside [0, %d]", d.Milliseconds(), l.MaxLockDelay.Milliseconds())
	}
	return nil
}

// NormalizeMetadata checks that raw is empty or null (no metadata) or a JSON object of at most
// 4 KiB once compacted, and returns it compacted (nil for none).
func NormalizeMetadata(raw json.RawMessage) (json.RawMessage, error) {
	raw = bytes.Trim(raw, " \t\r\n") // JSON's whitespace only: bytes.TrimSpace would accept \v, \f…
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, nil
	}
	if raw[0] != '{' {
		return nil, invalid("metadata", "metadata must be a JSON object")
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, invalid("metadata", "metadata is not valid JSON")
	}
	if buf.Len() > MaxMetadataLen {
		return nil, invalid("metadata", "metadata is %d bytes, more than %d", buf.Len(), MaxMetadataLen)
	}
	return buf.Bytes(), nil
}

func invalid(field, format string, args ...any) *Error {
	msg := fmt.Sprintf(format, args...)
	return &Error{Code: CodeInvalid, Message: msg, Fields: []string{field + ": " + msg}}
}

// maxMillis bounds any duration in milliseconds a client sends, far above every limit (about
// 35 years) and far below where converting it to a time.Duration would overflow.
const maxMillis = 1 << 40

// Millis converts a duration in milliseconds from a request field into a time.Duration,
// refusing negative values and values so large that the conversion would wrap around.
func Millis(field string, ms int64) (time.Duration, error) {
	if ms < 0 || ms > maxMillis {
		return 0, invalid(field, "%s %d is out of range", field, ms)
	}
	return time.Duration(ms) * time.Millisecond, nil
}
