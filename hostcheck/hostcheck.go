package hostcheck

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/gpuaas/imagectl/internal/shell"
	"github.com/gpuaas/imagectl/validate"
)

// Defaults of Options.
const (
	// DefaultUser is the login of a freshly deployed MAAS host (runbook
	// 001: hosts are reached as ubuntu, which may sudo).
	DefaultUser = "ubuntu"
	// DefaultParallel is how many hosts are checked at once.
	DefaultParallel = 8
	// DefaultConnectTimeout bounds ssh's connection to one host (the
	// user's ConnectTimeout option wins).
	DefaultConnectTimeout = 10 * time.Second
	// DefaultTimeout bounds one host's whole check: the script waits for
	// Netdata's collectors, a minute by default, and checks the GPUs.
	DefaultTimeout = 10 * time.Minute
)

// maxStderr bounds what is kept of ssh's stderr, for the error message.
const maxStderr = 16 << 10

// Options say how the hosts are checked.
type Options struct {
	// Script is the validation script's path on the hosts: the
	// manifest's validation.script.
	Script string
	// Profile and Stage are passed as --profile and --stage; "" leaves the
	// script's default.
	Profile, Stage string
	// User logs in (ssh -l); DefaultUser when "". A user other than root
	// runs the script with sudo -n.
	User string
	// SSHOptions are "Key=Value" ssh options (-o), after BatchMode=yes and
	// before imagectl's ConnectTimeout, so that theirs wins.
	SSHOptions []string
	// Parallel bounds the hosts checked at once; DefaultParallel when 0.
	Parallel int
	// Timeout bounds each host's check; DefaultTimeout when 0.
	Timeout time.Duration
	// SSH is the ssh program; "ssh" from PATH when "".
	SSH string
	// Env is ssh's environment (its agent socket); the process's when nil.
	Env []string
	// Done, when set, is called as each host's check ends (from several
	// goroutines at once).
	Done func(HostResult)
}

// HostResult is one host's check: the result its script wrote, or why
// there is none.
type HostResult struct {
	Host string `json:"host"`
	// Result is the script's document; nil when the host could not be
	// checked.
	Result *validate.Result `json:"result,omitempty"`
	// Error says why the host gave no result: ssh failed (unreachable,
	// refused the login, sudo asked for a password) or its output is not a
	// validation result.
	Error string `json:"error,omitempty"`
}

var optionRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9]*=`)

// CheckOptions says what is wrong with o and the hosts, nil when nothing
// is; Check calls it first. An empty Script is left to Check, so that
// the hosts and flags can be checked before the script is known.
func CheckOptions(hosts []string, o Options) error {
	var errs []error
	if len(hosts) == 0 {
		errs = append(errs, errors.New("no host to check"))
	}
	for _, h := range hosts {
		if err := checkHost(h); err != nil {
			errs = append(errs, err)
		}
	}
	if o.Script != "" && (!strings.HasPrefix(o.Script, "/") || strings.ContainsRune(o.Script, 0)) {
		errs = append(errs, fmt.Errorf("the validation script's path on the hosts %q is not an absolute path", o.Script))
	}
	if u := o.User; strings.HasPrefix(u, "-") || strings.ContainsFunc(u, notInName) {
		errs = append(errs, fmt.Errorf("user %q: a login name does not start with '-' or hold spaces or control characters", u))
	}
	for _, v := range []struct{ flag, v string }{{"--profile", o.Profile}, {"--stage", o.Stage}} {
		if strings.HasPrefix(v.v, "-") || strings.ContainsFunc(v.v, notInName) {
			errs = append(errs, fmt.Errorf("%s %q: not a profile or stage name", v.flag, v.v))
		}
	}
	for _, opt := range o.SSHOptions {
		if !optionRE.MatchString(opt) || strings.ContainsFunc(opt, unicode.IsControl) {
			errs = append(errs, fmt.Errorf("ssh option %q: want KEY=VALUE, as ssh -o takes it", opt))
		}
	}
	if o.Parallel < 0 {
		errs = append(errs, fmt.Errorf("parallel %d: want 1 or more", o.Parallel))
	}
	if o.Timeout < 0 {
		errs = append(errs, fmt.Errorf("timeout %s: want more than 0", o.Timeout))
	}
	return errors.Join(errs...)
}

func notInName(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }

// checkHost refuses what ssh would read as an option, or what is no host
// name at all.
func checkHost(h string) error {
	switch {
	case h == "":
		return errors.New("an empty host name")
	case strings.HasPrefix(h, "-"):
		return fmt.Errorf("host %q starts with '-': ssh would read it as an option", h)
	case strings.ContainsFunc(h, notInName):
		return fmt.Errorf("host %q holds spaces or control characters", h)
	}
	return nil
}

// RemoteCommand is the command line the hosts' shell runs: the script,
// with sudo -n unless the user is root, each value quoted.
func RemoteCommand(o Options) string {
	args := []string{"sh", o.Script, "--json"}
	if o.Profile != "" {
		args = append(args, "--profile", o.Profile)
	}
	if o.Stage != "" {
		args = append(args, "--stage", o.Stage)
	}
	cmd := shell.Join(args)
	if user(o) != "root" {
		cmd = "sudo -n " + cmd
	}
	return cmd
}

func user(o Options) string {
	if o.User == "" {
		return DefaultUser
	}
	return o.User
}

// Command is the ssh argument vector that checks host (the program
// first): BatchMode so that nothing prompts, the user's -o options, a
// connect timeout, the login, and the host after "--" so that it cannot be
// read as an option.
func Command(host string, o Options) []string {
	prog := o.SSH
	if prog == "" {
		prog = "ssh"
	}
	argv := []string{prog, "-T", "-o", "BatchMode=yes"}
	for _, opt := range o.SSHOptions {
		argv = append(argv, "-o", opt)
	}
	argv = append(argv, "-o", fmt.Sprintf("ConnectTimeout=%d", int(DefaultConnectTimeout/time.Second)),
		"-l", user(o), "--", host, RemoteCommand(o))
	return argv
}

// Check runs the validation script on every host, o.Parallel at a time,
// and returns each host's result in the order of hosts. A host that could
// not be checked has its Error set; the error returned is for options
// that are wrong (CheckOptions) or for ctx ending, when the hosts not yet
// checked are not started and those running are stopped (their ssh
// killed).
func Check(ctx context.Context, hosts []string, o Options) ([]HostResult, error) {
	if err := CheckOptions(hosts, o); err != nil {
		return nil, err
	}
	if o.Script == "" {
		return nil, errors.New("checking hosts: no validation script path")
	}
	parallel := o.Parallel
	if parallel == 0 {
		parallel = DefaultParallel
	}
	out := make([]HostResult, len(hosts))
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	for i, h := range hosts {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			out[i] = checkOne(ctx, h, o)
			if o.Done != nil {
				o.Done(out[i])
			}
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("checking %d hosts: %w", len(hosts), context.Cause(ctx))
	}
	return out, nil
}

// checkOne runs the script on one host.
func checkOne(ctx context.Context, host string, o Options) HostResult {
	timeout := o.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeoutCause(ctx, timeout, fmt.Errorf("no result within %s", timeout))
	defer cancel()
	argv := Command(host, o)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = o.Env
	cmd.WaitDelay = 5 * time.Second
	stdout := &boundedBuffer{limit: validate.MaxResult, fail: true}
	stderr := &boundedBuffer{limit: maxStderr}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	err := cmd.Run()
	res := HostResult{Host: host}
	fail := func(format string, args ...any) HostResult {
		res.Error = fmt.Sprintf(format, args...)
		if s := strings.TrimSpace(stderr.String()); s != "" {
			res.Error += ": " + s
		}
		return res
	}
	switch {
	case ctx.Err() != nil:
		return fail("checking host %s: %v", host, context.Cause(ctx))
	case stdout.over:
		return fail("checking host %s: its output is larger than a validation result may be (%d bytes)", host, validate.MaxResult)
	}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		return fail("checking host %s: running %s: %v", host, argv[0], err)
	}
	// ssh exits 255 for its own errors; the script exits 1 when a check
	// failed, with its document all the same.
	if ee != nil && ee.ExitCode() == 255 {
		return fail("checking host %s: ssh could not run the script (exit status 255)", host)
	}
	r, perr := validate.ParseResult(stdout.Bytes())
	if perr != nil {
		status := "exit status 0"
		if ee != nil {
			status = ee.String()
		}
		return fail("checking host %s: the script's output (%s, %d bytes) is not a validation result: %v", host, status, stdout.Len(), perr)
	}
	res.Result = r
	return res
}

// boundedBuffer keeps at most limit bytes. Past it, it fails the write
// (fail: the output is useless, stop reading it) or drops the rest. It has
// no ReadFrom, so that every byte goes through Write.
type boundedBuffer struct {
	buf   bytes.Buffer
	limit int
	fail  bool
	over  bool
}

var errTooMuch = errors.New("output over its bound")

func (b *boundedBuffer) Write(p []byte) (int, error) {
	room := b.limit - b.buf.Len()
	if len(p) > room {
		b.over = true
		if b.fail {
			return 0, errTooMuch
		}
		b.buf.Write(p[:max(room, 0)])
		return len(p), nil
	}
	return b.buf.Write(p)
}

func (b *boundedBuffer) Bytes() []byte  { return b.buf.Bytes() }
func (b *boundedBuffer) String() string { return b.buf.String() }
func (b *boundedBuffer) Len() int       { return b.buf.Len() }
