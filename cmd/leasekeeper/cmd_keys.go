package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"text/tabwriter"

	"github.com/leasekeeper/leasekeeper/api"
)

// prefixList is a repeatable --prefix flag.
type prefixList []string

func (p *prefixList) String() string { return strings.Join(*p, ",") }

func (p *prefixList) Set(v string) error {
	*p = append(*p, v)
	return nil
}

// keysCommand runs `leasekeeper keys create|list|revoke` (admin keys only).
func keysCommand(ctx context.Context, cf *clientFlags, args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return &exitError{code: 2, err: errors.New("keys: say create, list or revoke")}
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		_, err := cf.parseAll([]string{"-h"})
		return err
	}
	sub, args := args[0], args[1:]
	cf.fs.Init("keys "+sub, flag.ContinueOnError) // its -h and errors are about the subcommand
	var label, role string
	var prefixes prefixList
	switch sub {
	case "create":
		cf.fs.StringVar(&label, "label", "", "who uses the key, for humans and audit records (required)")
		cf.fs.StringVar(&role, "role", "", "reader, writer or admin (required)")
		cf.fs.Var(&prefixes, "prefix", "a name prefix the key may act on; repeat for more (none: every name)")
	case "list", "revoke":
	default:
		return &exitError{code: 2, err: fmt.Errorf("keys: unknown subcommand %q (create, list or revoke)", sub)}
	}
	rest, err := cf.parseAll(args)
	if err != nil {
		return err
	}
	key, err := cf.apiKey()
	if err != nil {
		return err
	}
	hc := http.DefaultClient
	if cf.caFile != "" {
		if hc, err = caClient(cf.caFile); err != nil {
			return &exitError{code: 2, err: err}
		}
	}
	c, err := api.NewClientWithResponses(cf.server, api.WithHTTPClient(hc),
		api.WithRequestEditorFn(func(_ context.Context, r *http.Request) error {
			r.Header.Set("Authorization", "Bearer "+key)
			return nil
		}))
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	switch sub {
	case "create":
		if label == "" || role == "" || len(rest) > 0 {
			return &exitError{code: 2, err: errors.New("keys create: --label and --role are required, and nothing else")}
		}
		body := api.KeyRequest{Label: label, Role: api.Role(role)}
		if len(prefixes) > 0 {
			body.Prefixes = (*[]api.Name)(&prefixes)
		}
		r, err := c.CreateKeyWithResponse(ctx, body)
		if err != nil {
			return cliError(err)
		}
		if r.JSON201 == nil {
			return apiFailure("keys create", r.HTTPResponse.StatusCode, r.Body)
		}
		if cf.json {
			return writeJSON(stdout, r.JSON201)
		}
		k := r.JSON201.Record
		return writeKV(stdout, [][2]string{{"key", r.JSON201.Key}, {"id", k.Id}, {"label", k.Label}, {"role", string(k.Role)},
			{"prefixes", orAll(k.Prefixes)}, {"note", "the key is shown only now; the server keeps only its hash"}})
	case "list":
		r, err := c.ListKeysWithResponse(ctx)
		if err != nil {
			return cliError(err)
		}
		if r.JSON200 == nil {
			return apiFailure("keys list", r.HTTPResponse.StatusCode, r.Body)
		}
		if cf.json {
			return writeJSON(stdout, r.JSON200)
		}
		tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tLABEL\tROLE\tPREFIXES\tCREATED\tREVOKED")
		for _, k := range r.JSON200.Keys {
			revoked := "-"
			if k.RevokedAt != nil {
				revoked = fmtTime(k.RevokedAt.Time)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", k.Id, k.Label, k.Role, orAll(k.Prefixes), fmtTime(k.CreatedAt.Time), revoked)
		}
		return tw.Flush()
	default: // revoke
		if len(rest) != 1 {
			return &exitError{code: 2, err: errors.New("keys revoke: one key id expected")}
		}
		r, err := c.RevokeKeyWithResponse(ctx, rest[0])
		if err != nil {
			return cliError(err)
		}
		if r.StatusCode() != 204 {
			return apiFailure("keys revoke", r.StatusCode(), r.Body)
		}
		return nil
	}
}

func orAll(prefixes []string) string {
	if len(prefixes) == 0 {
		return "(every name)"
	}
	return strings.Join(prefixes, ",")
}

// apiFailure turns an error answer into an exit error with the problem's detail.
func apiFailure(what string, status int, body []byte) error {
	return &exitError{code: 1, err: fmt.Errorf("%s: %d %s", what, status, strings.TrimSpace(string(body)))}
}
