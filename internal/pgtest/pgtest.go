// Package pgtest gives tests a PostgreSQL server: the one LEASEKEEPER_TEST_POSTGRES names, or a
// throwaway cluster (initdb and pg_ctl, in a temporary folder, reached only by its unix socket)
// that lives as long as the test binary. Each test gets a fresh database on it.
//
// Without PostgreSQL the tests skip, saying so, unless LEASEKEEPER_POSTGRES_TESTS=required
// (CI), where they fail.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Server is a PostgreSQL server for tests, started on first use.
type Server struct {
	// Settings are server settings (name=value) of the throwaway cluster, applied after its
	// defaults, which turn durability off (fsync, synchronous_commit, full_page_writes): e.g.
	// "synchronous_commit=on" for a test that crashes the server and counts what survived.
	Settings []string
	// WALDir, when set, is where the throwaway cluster keeps its WAL (initdb --waldir): an
	// existing empty folder the postgres user can write, e.g. a test filesystem.
	WALDir string

	once sync.Once
	url  string // of the maintenance database
	c    *cluster
	skip string // why there is no server
}

// Main runs the tests with srv, a server started by the first test that needs one, and stops it
// at the end. Call it from TestMain:
//
//	var srv = new(pgtest.Server)
//	func TestMain(m *testing.M) { pgtest.Main(m, srv) }
func Main(m *testing.M, srv *Server) {
	code := m.Run()
	srv.Stop()
	os.Exit(code)
}

// Stop stops the throwaway cluster, if one was started, and removes its folder.
func (s *Server) Stop() {
	if s.c != nil {
		s.c.stop()
	}
}

// Required reports whether the environment requires the PostgreSQL tests to run (CI).
func Required() bool { return os.Getenv("LEASEKEEPER_POSTGRES_TESTS") == "required" }

// NewDatabase makes a fresh, empty database for t and returns its URL; the database is dropped
// when t ends. It skips t (or fails it, when required) without a server.
func (s *Server) NewDatabase(t testing.TB) string {
	t.Helper()
	s.once.Do(s.start)
	if s.url == "" {
		if Required() {
			t.Fatalf("PostgreSQL tests are required (LEASEKEEPER_POSTGRES_TESTS=required): %s", s.skip)
		}
		t.Skipf("SKIPPED: PostgreSQL tests need a server: %s (set LEASEKEEPER_TEST_POSTGRES, or install PostgreSQL)", s.skip)
	}
	var b [6]byte
	rand.Read(b[:])
	name := "lk_test_" + hex.EncodeToString(b[:])
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, s.url)
	if err != nil {
		t.Fatalf("connect to the test server: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `CREATE DATABASE `+name); err != nil {
		t.Fatalf("create test database: %v", err)
	}
	t.Cleanup(func() {
		conn, err := pgx.Connect(ctx, s.url)
		if err != nil {
			return
		}
		defer conn.Close(ctx)
		conn.Exec(ctx, `DROP DATABASE IF EXISTS `+name+` WITH (FORCE)`)
	})
	return withDatabase(s.url, name)
}

// Restart stops the throwaway cluster in mode ("fast": clients are disconnected and the
// server shuts down cleanly; "immediate": a crash, recovered at start) and starts it again.
// Tests that need it skip on a server named by LEASEKEEPER_TEST_POSTGRES, which they cannot
// restart.
func (s *Server) Restart(t testing.TB, mode string) {
	t.Helper()
	s.cluster(t)
	if err := s.c.ctl("-m", mode, "restart"); err != nil {
		t.Fatal(err)
	}
}

// Down stops the throwaway cluster in mode ("immediate" is a crash: no checkpoint, and what
// the server had not written to its WAL files is lost) and leaves it stopped until Up.
func (s *Server) Down(t testing.TB, mode string) {
	t.Helper()
	s.cluster(t)
	if err := s.c.ctl("-m", mode, "stop"); err != nil {
		t.Fatal(err)
	}
}

// Up starts the cluster Down stopped, recovering it from its WAL after a crash.
func (s *Server) Up(t testing.TB) {
	t.Helper()
	s.cluster(t)
	if err := s.c.ctl("start"); err != nil {
		t.Fatal(err)
	}
}

// cluster skips t when the server is not a throwaway cluster of this test binary, which alone
// may be stopped and started.
func (s *Server) cluster(t testing.TB) {
	t.Helper()
	if s.c == nil {
		t.Skip("SKIPPED: the PostgreSQL server is not a throwaway cluster of this test binary; it cannot be stopped or restarted")
	}
}

// URL returns the URL of the server's maintenance database (empty without a server).
func (s *Server) URL() string { return s.url }

func withDatabase(base, name string) string {
	u, err := url.Parse(base)
	if err != nil {
		panic(err) // made by this package or checked at start
	}
	u.Path = "/" + name
	return u.String()
}

func (s *Server) start() {
	if u := os.Getenv("LEASEKEEPER_TEST_POSTGRES"); u != "" {
		if _, err := url.Parse(u); err != nil {
			s.skip = "LEASEKEEPER_TEST_POSTGRES: " + err.Error()
			return
		}
		s.url = u
		return
	}
	bin, err := findBin()
	if err != nil {
		s.skip = err.Error()
		return
	}
	if s.url, s.c, err = startCluster(bin, s.Settings, s.WALDir); err != nil {
		fmt.Fprintf(os.Stderr, "pgtest: cannot start a throwaway PostgreSQL: %v\n", err)
		s.skip = err.Error()
	}
}

// findBin finds the folder of initdb, pg_ctl and postgres: on PATH, or in Debian's place.
func findBin() (string, error) {
	if p, err := exec.LookPath("pg_ctl"); err == nil {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			return filepath.Dir(r), nil
		}
	}
	found, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pg_ctl")
	if len(found) == 0 {
		return "", errors.New("pg_ctl not found (Debian: apt-get install postgresql)")
	}
	return filepath.Dir(found[len(found)-1]), nil
}

// pgCommand runs one of PostgreSQL's programs, as the postgres user when the tests run as root
// (PostgreSQL refuses to run as root).
func pgCommand(bin, name string, args ...string) *exec.Cmd {
	if os.Geteuid() == 0 {
		return exec.Command("runuser", append([]string{"-u", "postgres", "--", filepath.Join(bin, name)}, args...)...)
	}
	return exec.Command(filepath.Join(bin, name), args...)
}

// cluster is a throwaway cluster in its own folder.
type cluster struct {
	bin, dir, data, opts string
}

// ctl runs pg_ctl on the cluster with args (a -m mode and start, stop or restart), waiting for
// it to finish.
func (c *cluster) ctl(args ...string) error {
	args = append([]string{"-D", c.data, "-o", c.opts, "-l", filepath.Join(c.dir, "log"), "-w", "-t", "60"}, args...)
	if out, err := pgCommand(c.bin, "pg_ctl", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("pg_ctl %s: %v: %s", args[len(args)-1], err, out)
	}
	return nil
}

// stop stops the cluster and removes its folder.
func (c *cluster) stop() {
	pgCommand(c.bin, "pg_ctl", "-D", c.data, "-m", "immediate", "-w", "stop").Run()
	os.RemoveAll(c.dir)
}

// startCluster makes a cluster in a temporary folder and starts it, as the postgres user when
// run as root (PostgreSQL refuses to run as root). It listens only on a unix socket in that
// folder, so nobody else on the machine reaches its trust authentication. settings follow the
// defaults; walDir, when set, holds the WAL.
func startCluster(bin string, settings []string, walDir string) (string, *cluster, error) {
	reapOrphans(bin)
	dir, err := os.MkdirTemp("", "lk-pg-")
	if err != nil {
		return "", nil, err
	}
	// The test binary that owns the cluster, so that a later one can stop it if this one is
	// killed (a timeout, a signal) before it stops the cluster itself.
	if err := os.WriteFile(filepath.Join(dir, "owner"), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	if os.Geteuid() == 0 {
		pu, err := user.Lookup("postgres")
		if err != nil {
			os.RemoveAll(dir)
			return "", nil, fmt.Errorf("running as root needs a postgres user: %w", err)
		}
		uid, _ := strconv.Atoi(pu.Uid)
		gid, _ := strconv.Atoi(pu.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			os.RemoveAll(dir)
			return "", nil, err
		}
	}
	c := &cluster{bin: bin, dir: dir, data: filepath.Join(dir, "data")}
	args := []string{"-D", c.data, "-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-sync"}
	if walDir != "" {
		args = append(args, "--waldir", walDir)
	}
	if out, err := pgCommand(bin, "initdb", args...).CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return "", nil, fmt.Errorf("initdb: %v: %s", err, out)
	}
	port, err := freePort()
	if err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	// Durability settings off: the cluster is thrown away with the test binary.
	c.opts = fmt.Sprintf("-p %d -k %s -c listen_addresses= -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=300", port, dir)
	for _, kv := range settings {
		c.opts += " -c " + kv
	}
	if err := c.ctl("start"); err != nil {
		log, _ := os.ReadFile(filepath.Join(dir, "log"))
		c.stop()
		return "", nil, fmt.Errorf("%w\n%s", err, log)
	}
	u := fmt.Sprintf("postgres://postgres@/postgres?host=%s&port=%d", url.QueryEscape(dir), port)
	if err := ping(u); err != nil {
		c.stop()
		return "", nil, err
	}
	return u, c, nil
}

// reapOrphans stops and removes the clusters of test binaries that no longer run.
func reapOrphans(bin string) {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), "lk-pg-*"))
	for _, dir := range dirs {
		b, err := os.ReadFile(filepath.Join(dir, "owner"))
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pid <= 0 || !errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
			continue // its owner still runs, or cannot be told apart from one that does
		}
		pgCommand(bin, "pg_ctl", "-D", filepath.Join(dir, "data"), "-m", "immediate", "-w", "stop").Run()
		os.RemoveAll(dir)
	}
}

func ping(u string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		return fmt.Errorf("connect to the throwaway cluster: %w", err)
	}
	return conn.Close(ctx)
}

// freePort returns a TCP port free now: the cluster names its socket after it, and a port of
// its own keeps it apart from any other cluster on the machine.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// Bin returns the folder of the PostgreSQL programs (pg_dump, psql), for tests that run them.
func Bin() (string, error) { return findBin() }
