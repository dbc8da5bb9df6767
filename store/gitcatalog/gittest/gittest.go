// Package gittest owns the git remotes gitcatalog's tests push to: an
// empty bare repository, the real git daemon serving a directory of them,
// and the real git http-backend behind basic auth; a file of a remote
// edited by hand. Only tests import it.
package gittest

import (
	"fmt"
	"net"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpuaas/imagectl/internal/testenv"
)

// Git returns the git program, stopping the test through testenv when
// there is none.
func Git(t testing.TB) string {
	t.Helper()
	return testenv.Tool(t, "git", "apt-get install git")
}

// Env is an environment that keeps git away from the machine's own
// configuration: HOME and GIT_CONFIG_GLOBAL in a temporary directory, no
// system config.
func Env(t testing.TB) []string {
	t.Helper()
	home := t.TempDir()
	cfg := filepath.Join(home, ".gitconfig")
	if err := os.WriteFile(cfg, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	return []string{"HOME=" + home, "GIT_CONFIG_GLOBAL=" + cfg, "GIT_CONFIG_NOSYSTEM=1"}
}

// Run runs git with args in dir under env (Env's when nil), failing the
// test when it fails, and returns its stdout.
func Run(t testing.TB, dir string, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command(Git(t), args...)
	cmd.Dir = dir
	if env == nil {
		env = Env(t)
	}
	cmd.Env = append(os.Environ(), env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git %s in %s: %v: %s", strings.Join(args, " "), dir, err, stderr.String())
	}
	return string(out)
}

// Bare makes an empty bare repository (refusing non-fast-forward pushes,
// and taking pushes over http) and returns its path.
func Bare(t testing.TB) string {
	t.Helper()
	return BareIn(t, t.TempDir(), "catalog.git")
}

// BareIn makes the empty bare repository root/name, as Bare does, and
// returns its path.
func BareIn(t testing.TB, root, name string) string {
	t.Helper()
	dir := filepath.Join(root, name)
	Run(t, root, nil, "init", "-q", "--bare", "--initial-branch=main", dir)
	Run(t, dir, nil, "config", "receive.denyNonFastForwards", "true")
	Run(t, dir, nil, "config", "http.receivepack", "true")
	return dir
}

// Edit changes the file rel (slash-separated) on remote's main branch as a
// person would by hand: in a clone of its own, the file rewritten by edit,
// committed and pushed.
func Edit(t testing.TB, remote string, env []string, rel string, edit func([]byte) []byte) {
	t.Helper()
	work := filepath.Join(t.TempDir(), "work")
	Run(t, "", env, "clone", "-q", remote, work)
	abs := filepath.Join(work, filepath.FromSlash(rel))
	b, err := os.ReadFile(abs)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(abs, edit(b), 0o644); err != nil {
		t.Fatal(err)
	}
	Run(t, work, env, "commit", "-q", "-am", "a hand edit")
	Run(t, work, env, "push", "-q", "origin", "HEAD:main")
}

// Daemon runs the real git daemon on a free loopback port, serving (and
// taking pushes to) every repository under root, until the test ends. It
// returns the base URL, git://127.0.0.1:PORT/, to which a repository's
// path under root is added.
func Daemon(t testing.TB, root string) string {
	t.Helper()
	git := Git(t)
	for try := 0; ; try++ {
		port := testenv.FreePort(t)
		cmd := exec.Command(git, "daemon", "--reuseaddr", "--base-path="+root, "--export-all", "--enable=receive-pack",
			"--listen=127.0.0.1", "--port="+strconv.Itoa(port), root)
		cmd.Env = append(os.Environ(), Env(t)...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // it forks a child per connection
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatalf("starting git daemon: %v", err)
		}
		exited := make(chan struct{})
		go func() { cmd.Wait(); close(exited) }()
		t.Cleanup(func() {
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		})
		addr := "127.0.0.1:" + strconv.Itoa(port)
		if waitListening(addr, exited) {
			return "git://" + addr + "/"
		}
		if try == 2 {
			t.Fatalf("git daemon did not listen on %s: %s", addr, stderr.String())
		}
	}
}

// waitListening waits until addr accepts connections, false when the
// process exits first or it takes more than 10 s.
func waitListening(addr string, exited <-chan struct{}) bool {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return false
		default:
		}
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return false
}

// HTTP serves the repositories under root with the real git http-backend
// (fetches and pushes) on a loopback httptest server that asks for basic
// auth as user and password, until the test ends. It returns the base
// URL, http://127.0.0.1:PORT/, to which a repository's path under root is
// added; the credentials are not in it.
func HTTP(t testing.TB, root, user, password string) string {
	t.Helper()
	Git(t)
	backend := "/usr/lib/git-core/git-http-backend"
	if out, err := exec.Command(Git(t), "--exec-path").Output(); err == nil {
		backend = filepath.Join(strings.TrimSpace(string(out)), "git-http-backend")
	}
	if _, err := os.Stat(backend); err != nil {
		testenv.Missing(t, "git http-backend is not installed ("+backend+")")
	}
	home := t.TempDir()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, p, ok := r.BasicAuth()
		if !ok || u != user || p != password {
			w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
			http.Error(w, "authentication required", http.StatusUnauthorized)
			return
		}
		h := &cgi.Handler{
			Path: backend,
			Dir:  root,
			Env: []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1", "REMOTE_USER=" + u,
				"HOME=" + home, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null"},
			InheritEnv: []string{"PATH"},
			Stderr:     testWriter{t},
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/"
}

// testWriter logs what http-backend says on stderr.
type testWriter struct{ t testing.TB }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Logf("git http-backend: %s", strings.TrimSpace(string(b)))
	return len(b), nil
}

// Credentials makes an environment (as Env's) whose git gives user and
// password to url through a credential helper (store, with its file in a
// temporary directory), the way users configure theirs.
func Credentials(t testing.TB, url, user, password string) []string {
	t.Helper()
	env := Env(t)
	home := strings.TrimPrefix(env[0], "HOME=")
	store := filepath.Join(home, "git-credentials")
	u := strings.Replace(url, "://", "://"+user+":"+password+"@", 1)
	if err := os.WriteFile(store, []byte(u+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	Run(t, home, env, "config", "--global", "credential.helper", fmt.Sprintf("store --file=%s", store))
	return env
}
