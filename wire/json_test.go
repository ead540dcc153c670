package wire

import (
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/api"
	"github.com/leasekeeper/leasekeeper/wiretime"
)

// wireStrings are strings that exercise every escape of encoding/json.
var wireStrings = []string{
	"", "w", "worker-3@host-a", `quote " and \ backslash`, "<script>&amp;</script>", "tab\tnew\nline\r\b\f",
	"\x00\x01\x1f\x7f", "caf\u00e9 \u2028 \u2029 \U0001F600", "bad \xff utf-8 \xc3", "\xed\xa0\x80 surrogate",
}

// fillWire sets every field of v, a value of a generated wire type: each pointer is set when
// all is true and set at random otherwise, so that the fast encoders meet each field present
// and absent.
func fillWire(t *testing.T, v reflect.Value, rnd *rand.Rand, all bool) {
	t.Helper()
	switch v.Kind() {
	case reflect.String:
		v.SetString(wireStrings[rnd.IntN(len(wireStrings))])
	case reflect.Int, reflect.Int64:
		v.SetInt(rnd.Int64N(1<<53) - 1<<52)
	case reflect.Bool:
		v.SetBool(rnd.IntN(2) == 0)
	case reflect.Pointer:
		if all || rnd.IntN(2) == 0 {
			v.Set(reflect.New(v.Type().Elem()))
			fillWire(t, v.Elem(), rnd, all)
		}
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		m.SetMapIndex(reflect.ValueOf(wireStrings[rnd.IntN(len(wireStrings))]), reflect.ValueOf(any(wireStrings[rnd.IntN(len(wireStrings))])))
		v.Set(m)
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[wiretime.Time]() {
			at := time.UnixMilli(rnd.Int64N(4e12)).Add(time.Duration(rnd.IntN(1e6))).In(time.FixedZone("X", 3600*(rnd.IntN(5)-2)))
			v.Set(reflect.ValueOf(wiretime.Time{Time: at}))
			return
		}
		for i := range v.NumField() {
			fillWire(t, v.Field(i), rnd, all)
		}
	default:
		t.Fatalf("fillWire: a field of kind %s in %s: teach the test and the fast encoder about it", v.Kind(), v.Type())
	}
}

// TestWireJSONMatchesEncodingJSON checks that the hot routes' answers are byte for byte, with
// their headers, what the generated strict server writes for the same value. Every field of the
// generated types is filled, so a field added to openapi.yaml that the fast encoders miss fails
// here.
func TestWireJSONMatchesEncodingJSON(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	same := func(name string, want, got func(http.ResponseWriter) error) {
		t.Helper()
		w1, w2 := httptest.NewRecorder(), httptest.NewRecorder()
		if err := want(w1); err != nil {
			t.Fatalf("%s: generated: %v", name, err)
		}
		if err := got(w2); err != nil {
			t.Fatalf("%s: fast: %v", name, err)
		}
		if w1.Code != w2.Code || !reflect.DeepEqual(w1.Header(), w2.Header()) || w1.Body.String() != w2.Body.String() {
			t.Fatalf("%s: fast answer\n%d %v\n%s\nwant\n%d %v\n%s", name, w2.Code, w2.Header(), w2.Body, w1.Code, w1.Header(), w1.Body)
		}
	}
	for i := range 2000 {
		all := i < 2
		var l api.Lease
		var r api.ResourceInfo
		var h api.PutResource200ResponseHeaders
		if i > 0 { // the first round: every field at its zero value
			fillWire(t, reflect.ValueOf(&l).Elem(), rnd, all)
			fillWire(t, reflect.ValueOf(&r).Elem(), rnd, all)
			fillWire(t, reflect.ValueOf(&h).Elem(), rnd, all)
		}
		same("acquire", api.AcquireLease200JSONResponse{Body: l, Headers: api.AcquireLease200ResponseHeaders{FencingToken: l.Token}}.VisitAcquireLeaseResponse,
			LeaseAnswer{l}.VisitAcquireLeaseResponse)
		same("renew", api.RenewLease200JSONResponse{Body: l, Headers: api.RenewLease200ResponseHeaders{FencingToken: l.Token}}.VisitRenewLeaseResponse,
			LeaseAnswer{l}.VisitRenewLeaseResponse)
		same("put", api.PutResource200JSONResponse{Body: r, Headers: h}.VisitPutResourceResponse,
			ResourceAnswer{Body: r, ETag: h.ETag}.VisitPutResourceResponse)
		loc := "/v1/resources/" + r.Resource
		same("put created", api.PutResource201JSONResponse{Body: r, Headers: api.PutResource201ResponseHeaders{ETag: h.ETag, Location: loc}}.VisitPutResourceResponse,
			ResourceAnswer{Body: r, ETag: h.ETag, Location: loc}.VisitPutResourceResponse)
	}
}

// FuzzAppendString checks the string encoder against encoding/json's on any input.
func FuzzAppendString(f *testing.F) {
	for _, s := range wireStrings {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendString(nil, s); string(got) != string(want) {
			t.Fatalf("appendString(%q) = %s; want %s", s, got, want)
		}
	})
}

// discardWriter is a ResponseWriter that keeps its headers and drops the body.
type discardWriter struct{ h http.Header }

func (d *discardWriter) Header() http.Header         { return d.h }
func (d *discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (d *discardWriter) WriteHeader(int)             {}

// BenchmarkLeaseAnswer compares a renewal's answer written by the generated strict server with
// the fast encoder (go test -bench LeaseAnswer ./wire).
func BenchmarkLeaseAnswer(b *testing.B) {
	at := wiretime.From(time.Date(2026, 11, 29, 8, 45, 13, 120e6, time.UTC))
	epoch := "ep_Xk2v9QmB0aE"
	l := api.Lease{Name: "billing-nightly", Holder: "worker-3@host-a", Token: 1796000000000000, TtlMs: 15000,
		AcquiredAt: at, RenewedAt: at, ExpiresAt: at, ServerEpoch: &epoch}
	b.Run("generated", func(b *testing.B) {
		w := &discardWriter{h: http.Header{}}
		for b.Loop() {
			api.RenewLease200JSONResponse{Body: l, Headers: api.RenewLease200ResponseHeaders{FencingToken: l.Token}}.VisitRenewLeaseResponse(w)
		}
	})
	b.Run("fast", func(b *testing.B) {
		w := &discardWriter{h: http.Header{}}
		for b.Loop() {
			LeaseAnswer{l}.VisitRenewLeaseResponse(w)
		}
	})
}
