package lease

import "strings"

// An acquire of several names grants every name or none: each name is decided by the rule of
// a single acquire (DecideAcquire, CheckLimit), and the grants are written only when every
// name was granted.

// MaxNames bounds the names of one acquire of several names.
const MaxNames = 64

// ValidateNames checks the names of an acquire of several names: 1 to MaxNames valid names,
// none twice.
func ValidateNames(names []string) error {
	if len(names) == 0 {
		return invalid("names", "names is empty: give at least one name")
	}
	if len(names) > MaxNames {
		return invalid("names", "names has %d names, at most %d are allowed", len(names), MaxNames)
	}
	seen := make(map[string]bool, len(names))
	for _, n := range names {
		if err := ValidateName(n); err != nil {
			return err
		}
		if seen[n] {
			return invalid("names", "name %q is given twice", n)
		}
		seen[n] = true
	}
	return nil
}

// HeldAll is the refusal of an acquire of asked names when the names held refused it, held[i]
// refused by refusal[i] (a lease_held of DecideAcquire): it names them all, with the holder and
// expiry of the first, and is available when the last of them is.
func HeldAll(asked int, held []string, refusal []*Error) *Error {
	first := refusal[0]
	e := Errorf(CodeHeld, "%d of the %d names asked are held (%s), so none was granted: %s", len(held), asked,
		strings.Join(held, ", "), first.Message)
	e.Holder, e.ExpiresAt, e.Held = first.Holder, first.ExpiresAt, held
	for _, r := range refusal {
		if r.AvailableAt.After(e.AvailableAt) {
			e.AvailableAt = r.AvailableAt
		}
	}
	return e
}
