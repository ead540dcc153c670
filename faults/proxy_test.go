package faults

import (
	"bufio"
	"bytes"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// lossyProxy forwards one HTTP/1.1 request per connection to the server and then, at random,
// drops the answer (the server has acted; the client sees the connection close), delays it,
// or delays it past the client's patience. Clients must send Connection: close.
type lossyProxy struct {
	ln                     net.Listener
	target                 string
	dropP, delayP, staleP  float64
	grantDropP             float64 // an acquire's grant (200) is dropped at once with this chance instead
	dropped, delayed, sent atomic.Int64
	droppedGrants          atomic.Int64 // grants dropped at once: the client's retry must find them
	wg                     sync.WaitGroup
}

func newLossyProxy(t testing.TB, target string, dropP, delayP, staleP, grantDropP float64) *lossyProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &lossyProxy{ln: ln, target: target, dropP: dropP, delayP: delayP, staleP: staleP, grantDropP: grantDropP}
	p.wg.Go(p.serve)
	t.Cleanup(func() { ln.Close(); p.wg.Wait() })
	return p
}

func (p *lossyProxy) addr() string { return p.ln.Addr().String() }

func (p *lossyProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Go(func() { p.relay(c) })
	}
}

func (p *lossyProxy) relay(c net.Conn) {
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	req, err := http.ReadRequest(bufio.NewReader(c))
	if err != nil {
		return
	}
	s, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	defer s.Close()
	s.SetDeadline(time.Now().Add(10 * time.Second))
	if err := req.Write(s); err != nil {
		return
	}
	answer, _ := io.ReadAll(s) // the server closes after its answer: it has acted
	grant := req.Method == http.MethodPost && strings.HasSuffix(req.URL.Path, "/acquire") &&
		bytes.HasPrefix(answer, []byte("HTTP/1.1 200 "))
	if grant && rand.Float64() < p.grantDropP {
		p.dropped.Add(1)
		p.droppedGrants.Add(1)
		return
	}
	switch r := rand.Float64(); {
	case r < p.dropP:
		p.dropped.Add(1)
		if grant {
			p.droppedGrants.Add(1)
		}
		return
	case r < p.dropP+p.staleP:
		p.dropped.Add(1)
		time.Sleep(1500 * time.Millisecond) // longer than the client waits: it gave up
	case r < p.dropP+p.staleP+p.delayP:
		p.delayed.Add(1)
		time.Sleep(time.Duration(rand.IntN(200)) * time.Millisecond)
	}
	p.sent.Add(1)
	c.Write(answer)
}
