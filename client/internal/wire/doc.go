// Package wire holds the client's half of the code generated from openapi.yaml by
// oapi-codegen: the wire types and the HTTP client, without the server interface, the router
// and the embedded spec of package api, so that programs using the Go client do not carry the
// server's dependencies. Nothing here is edited by hand; run `make generate`.
package wire
