package testenv

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
)

// PostgresEnv names the environment variable that points the tests at a
// Postgres server of one's own: a DSN whose role may create databases.
// Unset, the tests start a server of their own.
const PostgresEnv = "BERTH_TEST_POSTGRES"

// pg is the test binary's shared Postgres server, started by the first
// Postgres call and stopped by StopPostgres.
var pg struct {
	mu     sync.Mutex // guards everything below
	admin  string     // DSN of the server's maintenance database
	err    error      // why the server could not be had (sticky)
	tried  bool
	server *PostgresServer // nil for $BERTH_TEST_POSTGRES
	seq    int
}

// Postgres returns the DSN of a fresh, empty database that t owns: its
// own CREATE DATABASE, dropped when t ends. The server is $BERTH_TEST_POSTGRES
// when set, else one the test binary starts once, on first use, from
// Debian's postgresql binaries (/usr/lib/postgresql/<version>/bin): a
// cluster in a temporary directory, listening on 127.0.0.1 at a free port
// and on a unix socket there, with trust authentication (the test cluster
// only: it listens on loopback, holds nothing but test data, and lives as
// long as the test binary). Missing binaries are Missing.
//
// Packages that call Postgres stop the server from TestMain with
// PostgresMain. Without it the server still dies with the test binary (it
// is started with a parent-death signal), but its directory stays in the
// temporary directory; the same holds when the binary is killed with
// SIGKILL or panics on a test timeout. The next test binary that starts a
// server removes such directories.
func Postgres(t testing.TB) string {
	t.Helper()
	admin, err := sharedPostgres()
	if err != nil {
		if errors.Is(err, errNoPostgres) {
			Missing(t, "%v", err)
		}
		t.Fatalf("starting the test Postgres: %v", err)
	}
	pg.mu.Lock()
	pg.seq++
	name := fmt.Sprintf("berth_test_%d_%d_%s", os.Getpid(), pg.seq, randomHex(4))
	pg.mu.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db, err := sql.Open("pgx", admin)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, `CREATE DATABASE `+name); err != nil {
		t.Fatalf("creating test database %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		db, err := sql.Open("pgx", admin)
		if err != nil {
			t.Errorf("dropping test database %s: %v", name, err)
			return
		}
		defer db.Close()
		// FORCE ends connections a test left open.
		if _, err := db.ExecContext(ctx, `DROP DATABASE IF EXISTS `+name+` WITH (FORCE)`); err != nil {
			t.Errorf("dropping test database %s: %v", name, err)
		}
	})
	u, err := url.Parse(admin)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	return u.String()
}

// PostgresMain runs m's tests, then stops the test Postgres (if they
// started one) and removes its directory. Call it from TestMain:
//
//	func TestMain(m *testing.M) { testenv.PostgresMain(m) }
func PostgresMain(m *testing.M) {
	code := m.Run()
	if err := StopPostgres(); err != nil {
		fmt.Fprintf(os.Stderr, "testenv: stopping the test Postgres: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

// StopPostgres stops the shared Postgres server the test binary started
// (a fast shutdown: SIGINT, then SIGKILL after 30 seconds) and removes its
// directory. Without one it does nothing. Postgres calls after it fail.
func StopPostgres() error {
	pg.mu.Lock()
	defer pg.mu.Unlock()
	server := pg.server
	pg.tried, pg.server, pg.err = true, nil, errors.New("the test Postgres was stopped")
	if server == nil {
		return nil
	}
	return server.remove()
}

var errNoPostgres = errors.New("Postgres is not installed (apt-get install postgresql) and " + PostgresEnv + " is not set")

// sharedPostgres returns the maintenance DSN of the shared server,
// starting it on the first call.
func sharedPostgres() (string, error) {
	pg.mu.Lock()
	defer pg.mu.Unlock()
	if pg.tried {
		return pg.admin, pg.err
	}
	pg.tried = true
	if dsn := os.Getenv(PostgresEnv); dsn != "" {
		pg.admin = dsn
		return dsn, nil
	}
	pg.server, pg.err = newPostgresServer()
	if pg.err == nil {
		pg.admin = pg.server.DSN()
	}
	return pg.admin, pg.err
}

// PostgresServer is a Postgres server the test binary runs: its own
// cluster in a temporary directory, the postmaster a child of the test
// binary.
type PostgresServer struct {
	bin  string              // the server's binaries
	cred *syscall.Credential // whom it runs as: the postgres user under root, else nil
	dir  string              // data/, the socket, postgres.log, owner.pid
	port int

	mu   sync.Mutex    // guards cmd and done
	cmd  *exec.Cmd     // the running postmaster; nil when stopped
	done chan struct{} // closed when cmd has exited
}

// NewPostgresServer starts a Postgres server of t's own, for a test that
// stops and starts it (an outage); it is removed when t ends. Everything
// else shares one server through Postgres. $BERTH_TEST_POSTGRES does not
// apply: the test must control the server.
func NewPostgresServer(t testing.TB) *PostgresServer {
	t.Helper()
	s, err := newPostgresServer()
	if errors.Is(err, errNoPostgres) {
		Missing(t, "%v", err)
	}
	if err != nil {
		t.Fatalf("starting a test Postgres: %v", err)
	}
	t.Cleanup(func() {
		if err := s.remove(); err != nil {
			t.Errorf("removing the test Postgres: %v", err)
		}
	})
	return s
}

// DSN is the server's maintenance database ("postgres"), as its
// superuser.
func (s *PostgresServer) DSN() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", s.port)
}

// newPostgresServer makes a cluster in a new temporary directory and
// starts it. Postgres refuses to run as root: as root, the directory is
// given to the postgres user and both initdb and the postmaster run as it.
func newPostgresServer() (*PostgresServer, error) {
	bin := PostgresBin()
	if bin == "" {
		return nil, errNoPostgres
	}
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("%w (no postgres user to run it as: %v)", errNoPostgres, err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	base := os.TempDir()
	if cred != nil && !othersCanEnter(base) {
		base = "/tmp" // the postgres user must reach its data directory
	}
	removeStaleClusters(base)
	dir, err := os.MkdirTemp(base, "berth-pg-")
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*PostgresServer, error) {
		os.RemoveAll(dir)
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "owner.pid"), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		return fail(err)
	}
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return fail(err)
		}
	}
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", filepath.Join(dir, "data"), "-U", "postgres", "--auth=trust",
		"--encoding=UTF8", "--locale=C.UTF-8", "--no-sync")
	initdb.Dir = dir
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		return fail(fmt.Errorf("initdb: %v\n%s", err, out))
	}
	port, err := freePort()
	if err != nil {
		return fail(err)
	}
	s := &PostgresServer{bin: bin, cred: cred, dir: dir, port: port}
	if err := s.Start(); err != nil {
		return fail(err)
	}
	return s, nil
}

// Start starts the server (again), on the same port, and waits until it
// answers. Starting a running server does nothing.
func (s *PostgresServer) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		select {
		case <-s.done: // it died on its own: start it again
			s.cmd, s.done = nil, nil
		default:
			return nil
		}
	}
	logf, err := os.OpenFile(filepath.Join(s.dir, "postgres.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	if s.cred != nil {
		_ = logf.Chown(int(s.cred.Uid), int(s.cred.Gid))
	}
	cmd := exec.Command(filepath.Join(s.bin, "postgres"), "-D", filepath.Join(s.dir, "data"), "-p", strconv.Itoa(s.port),
		"-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories="+s.dir,
		"-c", "fsync=on", "-c", "max_connections=200", "-c", "shared_buffers=32MB")
	cmd.Dir = s.dir
	cmd.Stdout, cmd.Stderr = logf, logf
	// SIGQUIT (immediate shutdown) when the thread that started it exits,
	// which is at the latest when the test binary does: the server never
	// outlives it. The thread is locked for good so the runtime never
	// retires it first.
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred, Pdeathsig: syscall.SIGQUIT, Setpgid: true}
	started := make(chan error)
	done := make(chan struct{})
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		_ = cmd.Wait()
		close(done)
	}()
	if err := <-started; err != nil {
		return fmt.Errorf("starting postgres: %w", err)
	}
	if err := waitReady(s.DSN(), done); err != nil {
		_ = cmd.Process.Kill()
		<-done
		log, _ := os.ReadFile(filepath.Join(s.dir, "postgres.log"))
		return fmt.Errorf("%w\n%s", err, log)
	}
	s.cmd, s.done = cmd, done
	return nil
}

// Stop stops the server (a fast shutdown: SIGINT, then SIGKILL after 30
// seconds), keeping its data. Stopping a stopped server does nothing.
func (s *PostgresServer) Stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return nil
	}
	cmd, done := s.cmd, s.done
	s.cmd, s.done = nil, nil
	_ = cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-done:
		return nil
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		return errors.New("postgres did not stop within 30s of SIGINT; killed it")
	}
}

// remove stops the server and removes its directory.
func (s *PostgresServer) remove() error {
	return errors.Join(s.Stop(), os.RemoveAll(s.dir))
}

// PostgresBin returns the directory of the newest Postgres server binaries
// Debian installed, or "" when there are none.
func PostgresBin() string {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int {
		va, _ := strconv.Atoi(filepath.Base(filepath.Dir(a)))
		vb, _ := strconv.Atoi(filepath.Base(filepath.Dir(b)))
		return va - vb
	})
	for i := len(dirs) - 1; i >= 0; i-- {
		if _, err := os.Stat(filepath.Join(dirs[i], "postgres")); err == nil {
			return dirs[i]
		}
	}
	return ""
}

// removeStaleClusters removes the directories of test clusters whose test
// binary is gone (SIGKILL, or a test timeout's panic, runs no cleanup; the
// parent-death signal has stopped their server). Each directory names its
// test binary in owner.pid.
func removeStaleClusters(base string) {
	dirs, _ := filepath.Glob(filepath.Join(base, "berth-pg-*"))
	for _, dir := range dirs {
		b, err := os.ReadFile(filepath.Join(dir, "owner.pid"))
		if err != nil {
			continue // being made, or not ours
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pid <= 0 {
			continue
		}
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) || zombie(pid) {
			os.RemoveAll(dir)
		}
	}
}

// othersCanEnter reports whether a user other than the owner may enter
// dir: it and every directory above it are executable by others.
func othersCanEnter(dir string) bool {
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil || fi.Mode().Perm()&0o001 == 0 {
			return false
		}
		if d == filepath.Dir(d) {
			return true
		}
	}
}

// zombie reports whether process pid has exited and awaits its reaper.
func zombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the command's closing parenthesis.
	i := strings.LastIndexByte(string(b), ')')
	return i >= 0 && i+2 < len(b) && b[i+2] == 'Z'
}

// waitReady waits up to a minute for the server at dsn to answer.
func waitReady(dsn string, exited <-chan struct{}) error {
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	deadline := time.Now().Add(time.Minute)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err := db.PingContext(ctx)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-exited:
			return errors.New("postgres exited before it answered")
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("postgres did not answer within a minute: %w", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
