package sandbox

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// gateway is the way out of one session's network namespace: a unix
// socket serving an allowlisting HTTP proxy (CONNECT, and plain HTTP with
// an absolute URI), and one socket per allowed loopback address that
// forwards bytes there as they are. The sandbox's init listens on its own
// loopback and hands each connection to these sockets.
type gateway struct {
	allow  allowlist
	denied func(hostport string)
	lns    []net.Listener
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  map[net.Conn]bool
	closed bool
}

func (g *gateway) serveProxy(ln net.Listener) {
	g.serve(ln, g.proxy)
}

func (g *gateway) serveForward(ln net.Listener, target string) {
	g.serve(ln, func(c net.Conn) {
		up, err := net.DialTimeout("tcp", target, 10*time.Second)
		if err != nil {
			return
		}
		g.track(up, true)
		defer g.track(up, false)
		splice(c, up, nil)
	})
}

func (g *gateway) serve(ln net.Listener, handle func(net.Conn)) {
	g.lns = append(g.lns, ln)
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if !g.track(c, true) {
				c.Close()
				return
			}
			g.wg.Add(1)
			go func() {
				defer g.wg.Done()
				defer g.track(c, false)
				defer c.Close()
				handle(c)
			}()
		}
	}()
}

// track adds or removes an open connection; false once closed.
func (g *gateway) track(c net.Conn, add bool) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.conns == nil {
		g.conns = map[net.Conn]bool{}
	}
	if !add {
		delete(g.conns, c)
		return true
	}
	if g.closed {
		return false
	}
	g.conns[c] = true
	return true
}

// close stops the listeners and cuts the connections still open (the
// confined processes are gone by then).
func (g *gateway) close() {
	g.mu.Lock()
	g.closed = true
	for c := range g.conns {
		c.Close()
	}
	g.mu.Unlock()
	for _, ln := range g.lns {
		ln.Close()
	}
	g.wg.Wait()
}

// proxy serves one client connection: a CONNECT to an allowed host:port
// becomes a tunnel; a plain request with an absolute URI to an allowed
// host is sent there with "Connection: close" (so that a kept-alive
// connection never carries a second request to another host); anything
// else is answered 403 and recorded.
func (g *gateway) proxy(c net.Conn) {
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	br := bufio.NewReader(c)
	req, err := http.ReadRequest(br)
	if err != nil {
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	target := req.Host
	if req.Method != http.MethodConnect {
		if req.URL == nil || !req.URL.IsAbs() {
			deny(c, "ralph's sandbox proxy takes only absolute URIs and CONNECT")
			return
		}
		target = HostOf(req.URL.Scheme + "://" + req.URL.Host)
	} else if _, _, err := net.SplitHostPort(target); err != nil {
		target = net.JoinHostPort(target, "443")
	}
	if !g.allow.allows(target) {
		if g.denied != nil {
			g.denied(target)
		}
		deny(c, "ralph's sandbox does not allow "+target)
		return
	}
	up, err := net.DialTimeout("tcp", target, 15*time.Second)
	if err != nil {
		io.WriteString(c, "HTTP/1.1 502 Bad Gateway\r\nConnection: close\r\nContent-Length: 0\r\n\r\n")
		return
	}
	g.track(up, true)
	defer g.track(up, false)
	defer up.Close()
	if req.Method == http.MethodConnect {
		if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
			return
		}
		splice(c, up, br)
		return
	}
	req.RequestURI = ""
	req.Close = true
	req.Header.Del("Proxy-Connection")
	req.Header.Del("Proxy-Authorization")
	go func() {
		_ = req.Write(up)
	}()
	_, _ = io.Copy(c, up)
}

func deny(c net.Conn, msg string) {
	io.WriteString(c, "HTTP/1.1 403 Forbidden\r\nConnection: close\r\nContent-Type: text/plain\r\nContent-Length: "+
		strconv.Itoa(len(msg)+1)+"\r\n\r\n"+msg+"\n")
}

// splice copies both ways until either side ends; buffered is what the
// client already sent past the request line.
func splice(client, up net.Conn, buffered *bufio.Reader) {
	done := make(chan struct{}, 2)
	go func() {
		var src io.Reader = client
		if buffered != nil {
			src = buffered
		}
		_, _ = io.Copy(up, src)
		closeWrite(up)
		done <- struct{}{}
	}()
	go func() {
		_, _ = io.Copy(client, up)
		closeWrite(client)
		done <- struct{}{}
	}()
	<-done
	<-done
}

func closeWrite(c net.Conn) {
	type cw interface{ CloseWrite() error }
	if w, ok := c.(cw); ok {
		_ = w.CloseWrite()
		return
	}
	c.Close()
}

// isProxyEnv reports whether an environment variable names a proxy.
func isProxyEnv(k string) bool {
	switch strings.ToUpper(k) {
	case "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "FTP_PROXY":
		return true
	}
	return false
}
