// Package leasekeeper holds what belongs to the repository as a whole: the wire contract,
// openapi.yaml, embedded so the binary serves exactly the file that generated api/.
package leasekeeper

import _ "embed"

//go:embed openapi.yaml
var spec []byte

// OpenAPI returns a copy of openapi.yaml.
func OpenAPI() []byte { return append([]byte(nil), spec...) }
