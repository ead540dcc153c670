// Package smallbuf serves tests of clients that stop reading: it shrinks the send buffer of
// every accepted connection, so an answer the client does not read blocks the server's writes
// instead of vanishing into the kernel's buffers.
package smallbuf

import "net"

// Listener wraps l: each TCP connection it accepts gets a 4 KiB send buffer.
func Listener(l net.Listener) net.Listener { return listener{l} }

type listener struct{ net.Listener }

func (l listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetWriteBuffer(4096)
	}
	return c, err
}
