// Package api holds the code generated from openapi.yaml by oapi-codegen: the wire types, the
// chi strict-server interface and the HTTP client. Nothing here is edited by hand; run
// `make generate`.
package api

//go:generate sh -c "cd .. && go tool oapi-codegen -config api/config.yaml openapi.yaml"
