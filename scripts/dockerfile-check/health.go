package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/moby/buildkit/frontend/dockerfile/instructions"
)

// healthFindings runs the image's ENTRYPOINT and CMD, then its HEALTHCHECK, with a built binary
// in place of the image's (outside a container, which cannot run here): the server gets the
// image's environment with its listen port moved to a free loopback one and the working
// directory to a temporary one. The check must pass while the server runs and exit 1 once it
// has stopped.
//
// wait bounds how long the check may take to pass; zero means as long as Docker would wait.
func healthFindings(ctx context.Context, name string, dt []byte, binary string, wait time.Duration) []finding {
	c := &structure{name: name}
	stages, err := parseStages(dt)
	if err != nil {
		c.add(0, "health check not run: %v", err)
		return c.findings
	}
	final := stages[len(stages)-1]
	h, ok := lastOf[*instructions.HealthCheckCommand](final)
	if !ok || h.Health == nil || len(h.Health.Test) < 2 || h.Health.Test[0] != "CMD" {
		c.add(stageLine(final), "health check not run: no HEALTHCHECK in exec form (CMD [\"…\"])")
		return c.findings
	}
	serverArgs, ok := entrypointAndCmd(final)
	if !ok || path.Base(serverArgs[0]) != healthCommand[0] {
		c.add(stageLine(final), "health check not run: ENTRYPOINT and CMD in exec form do not start %s", healthCommand[0])
		return c.findings
	}
	dir, err := os.MkdirTemp("", "dockerfile-check-")
	if err != nil {
		c.add(0, "health check not run: %v", err)
		return c.findings
	}
	defer os.RemoveAll(dir)
	port, err := freePort()
	if err != nil {
		c.add(0, "health check not run: %v", err)
		return c.findings
	}
	env, imagePort := imageEnv(final, dir, port)
	if imagePort == "" {
		c.add(stageLine(final), "health check not run: the final stage sets no LEASEKEEPER_ADDR")
		return c.findings
	}
	healthArgs := make([]string, 0, len(h.Health.Test)-1)
	for _, a := range h.Health.Test[2:] {
		if strings.Contains(a, "://") {
			a = strings.Replace(a, ":"+imagePort, ":"+port, 1)
		}
		healthArgs = append(healthArgs, a)
	}
	timeout := h.Health.Timeout
	if timeout <= 0 {
		timeout = 30 * time.Second // Docker's default
	}
	health := func() (int, string) { return runHealth(ctx, binary, healthArgs, env, dir, timeout) }

	var serverOut bytes.Buffer
	server := exec.Command(binary, serverArgs[1:]...)
	server.Env, server.Dir, server.Stdout, server.Stderr = env, dir, &serverOut, &serverOut
	if err := server.Start(); err != nil {
		c.add(0, "health check not run: start %s: %v", binary, err)
		return c.findings
	}
	exited := make(chan error, 1)
	go func() { exited <- server.Wait() }()

	if wait <= 0 {
		// Docker gives a starting container the start period and then `retries` failures.
		wait = h.Health.StartPeriod + time.Duration(max(h.Health.Retries, 1))*max(h.Health.Interval, time.Second)
	}
	deadline := time.Now().Add(wait)
	code, out := health()
	// Exit 2 is a usage error here (and reserved by Docker): trying again cannot help.
	for code != 0 && code != 2 && time.Now().Before(deadline) {
		select {
		case err := <-exited:
			status := "exit status 0"
			if err != nil {
				status = err.Error()
			}
			c.add(cmdLine(h), "the server (%s) exited before the HEALTHCHECK passed (%s):\n%s", strings.Join(serverArgs, " "), status, tail(serverOut.String(), 5))
			return c.findings
		case <-time.After(200 * time.Millisecond):
		}
		code, out = health()
	}
	if code != 0 {
		c.add(cmdLine(h), "HEALTHCHECK failed against the running server (exit %d): %s", code, out)
	}
	_ = server.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		_ = server.Process.Kill()
		<-exited
	}
	if code, out := health(); code != 1 {
		c.add(cmdLine(h), "HEALTHCHECK exits %d with the server stopped, not 1 (unhealthy): %s", code, out)
	}
	return c.findings
}

// entrypointAndCmd is the command line the container starts, both in exec form.
func entrypointAndCmd(st instructions.Stage) ([]string, bool) {
	ep, ok := lastOf[*instructions.EntrypointCommand](st)
	if !ok || ep.PrependShell || len(ep.CmdLine) == 0 {
		return nil, false
	}
	args := append([]string{}, ep.CmdLine...)
	if cmd, ok := lastOf[*instructions.CmdCommand](st); ok {
		if cmd.PrependShell {
			return nil, false
		}
		args = append(args, cmd.CmdLine...)
	}
	return args, true
}

// imageEnv is this process's environment, less the LEASEKEEPER_ variables, plus the final stage's
// ENV with the working directory moved to dir and LEASEKEEPER_ADDR to 127.0.0.1:port. It returns
// the port the image listens on.
func imageEnv(st instructions.Stage, dir, port string) (env []string, imagePort string) {
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LEASEKEEPER_") {
			env = append(env, kv)
		}
	}
	workdir := ""
	if w, ok := lastOf[*instructions.WorkdirCommand](st); ok {
		workdir = path.Clean(w.Path)
	}
	for _, cmd := range st.Commands {
		e, ok := cmd.(*instructions.EnvCommand)
		if !ok {
			continue
		}
		for _, kv := range e.Env {
			v := kv.Value
			switch {
			case kv.Key == "LEASEKEEPER_ADDR":
				if _, p, err := net.SplitHostPort(v); err == nil {
					imagePort = p
				}
				v = net.JoinHostPort("127.0.0.1", port)
			case workdir != "" && strings.HasPrefix(v, workdir+"/"):
				v = filepath.Join(dir, strings.TrimPrefix(v, workdir+"/"))
			}
			env = append(env, kv.Key+"="+v)
		}
	}
	return env, imagePort
}

func runHealth(ctx context.Context, binary string, args, env []string, dir string, timeout time.Duration) (int, string) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env, cmd.Dir = env, dir
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0, tail(string(out), 1)
	case errors.As(err, &exit):
		return exit.ExitCode(), tail(string(out), 1)
	default:
		return -1, err.Error()
	}
}

func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	_, port, err := net.SplitHostPort(l.Addr().String())
	return port, err
}

// tail is the last n lines of a command's output, for a finding.
func tail(out string, n int) string {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	return strings.Join(lines[max(len(lines)-n, 0):], "\n")
}
