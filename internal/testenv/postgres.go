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

// pg is the test binary's one Postgres server, started by the first
// Postgres call and stopped by StopPostgres.
var pg struct {
	mu    sync.Mutex // guards everything below
	admin string     // DSN of the server's maintenance database
	err   error      // why the server could not be had (sticky)
	tried bool
	cmd   *exec.Cmd // the postmaster we started; nil for $BERTH_TEST_POSTGRES
	dir   string    // its temporary directory (data, socket, log)
	done  chan struct{}
	seq   int
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
	admin, err := startPostgres()
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

// StopPostgres stops the Postgres server the test binary started (a fast
// shutdown: SIGINT, then SIGKILL after 30 seconds) and removes its
// directory. Without one it does nothing. Postgres calls after it fail.
func StopPostgres() error {
	pg.mu.Lock()
	defer pg.mu.Unlock()
	if !pg.tried {
		pg.tried, pg.err = true, errors.New("the test Postgres was stopped")
		return nil
	}
	if pg.cmd == nil {
		return nil
	}
	cmd := pg.cmd
	pg.cmd, pg.err = nil, errors.New("the test Postgres was stopped")
	_ = cmd.Process.Signal(syscall.SIGINT)
	var err error
	select {
	case <-pg.done:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-pg.done
		err = errors.New("postgres did not stop within 30s of SIGINT; killed it")
	}
	return errors.Join(err, os.RemoveAll(pg.dir))
}

var errNoPostgres = errors.New("Postgres is not installed (apt-get install postgresql) and " + PostgresEnv + " is not set")

// startPostgres returns the maintenance DSN of the test server, starting
// it on the first call.
func startPostgres() (string, error) {
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
	pg.admin, pg.err = startCluster()
	return pg.admin, pg.err
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

// startCluster makes a cluster in a new temporary directory and starts its
// postmaster as a child of this process. Postgres refuses to run as root:
// as root, the directory is given to the postgres user and both initdb and
// the postmaster run as it.
func startCluster() (string, error) {
	bin := PostgresBin()
	if bin == "" {
		return "", errNoPostgres
	}
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return "", fmt.Errorf("%w (no postgres user to run it as: %v)", errNoPostgres, err)
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
		return "", err
	}
	fail := func(err error) (string, error) {
		os.RemoveAll(dir)
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, "owner.pid"), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		return fail(err)
	}
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return fail(err)
		}
	}
	data := filepath.Join(dir, "data")
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres", "--auth=trust",
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
	logf, err := os.Create(filepath.Join(dir, "postgres.log"))
	if err != nil {
		return fail(err)
	}
	defer logf.Close()
	if cred != nil {
		_ = logf.Chown(int(cred.Uid), int(cred.Gid))
	}
	cmd := exec.Command(filepath.Join(bin, "postgres"), "-D", data, "-p", strconv.Itoa(port),
		"-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories="+dir,
		"-c", "fsync=on", "-c", "max_connections=200", "-c", "shared_buffers=32MB")
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logf, logf
	// SIGQUIT (immediate shutdown) when the thread that started it exits,
	// which is at the latest when the test binary does: the server never
	// outlives it. The thread is locked for good so the runtime never
	// retires it first.
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGQUIT, Setpgid: true}
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
		return fail(fmt.Errorf("starting postgres: %w", err))
	}
	admin := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
	if err := waitReady(admin, done); err != nil {
		_ = cmd.Process.Kill()
		<-done
		log, _ := os.ReadFile(filepath.Join(dir, "postgres.log"))
		return fail(fmt.Errorf("%w\n%s", err, log))
	}
	pg.cmd, pg.dir, pg.done = cmd, dir, done
	return admin, nil
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
