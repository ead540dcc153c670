package store

import "errors"

// ErrPlaceLost is in the chain of an error of a store with a shared waiting line when a
// waiter's place was removed because its server seemed dead to the others (its database
// session ended, as in a database restart). The waiter may join the line again, at its end.
var ErrPlaceLost = errors.New("the place in line was lost")
