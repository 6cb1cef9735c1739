package main

import (
	"bufio"
	"fmt"
	"io"
	"log"
	"log/syslog"
	"os"
	"os/exec"
	"strings"
	"syscall"
)

// Without -f, rdmafs returns once the mount is ready, as mount(8) and
// fstab expect, and keeps serving it in the background. Go cannot fork,
// so the command starts itself again, detached, and waits on a pipe for
// the new process to report that the mount is ready or why it failed.

const daemonEnv = "RDMAFS_DAEMON_FD"

func isDaemonChild() bool { return os.Getenv(daemonEnv) != "" }

// daemonize starts the background process and waits for its report.
func daemonize() error {
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer null.Close()
	cmd := exec.Command(self, os.Args[1:]...)
	cmd.Env = append(os.Environ(), daemonEnv+"=3")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = null, null, null
	cmd.ExtraFiles = []*os.File{w}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	w.Close()
	report, _ := bufio.NewReader(r).ReadString('\n')
	r.Close()
	switch {
	case report == "ok\n":
		_ = cmd.Process.Release()
		return nil
	case strings.HasPrefix(report, "error "):
		_ = cmd.Wait()
		return &reportedError{strings.TrimSuffix(strings.TrimPrefix(report, "error "), "\n")}
	}
	err = cmd.Wait()
	return fmt.Errorf("the mount process ended without a report: %v", err)
}

// reportedError is the background process's error, already worded.
type reportedError struct{ msg string }

func (e *reportedError) Error() string { return e.msg }

// readyNotifier returns the function that reports the outcome of the
// mount: to the waiting parent in the background process, nowhere in the
// foreground.
func readyNotifier() func(error) {
	if !isDaemonChild() {
		return func(error) {}
	}
	w := os.NewFile(3, "ready")
	os.Unsetenv(daemonEnv)
	return func(err error) {
		if w == nil {
			return
		}
		if err == nil {
			io.WriteString(w, "ok\n")
		} else {
			io.WriteString(w, "error "+strings.ReplaceAll(err.Error(), "\n", " ")+"\n")
		}
		w.Close()
		w = nil
	}
}

// newLogger logs to stderr in the foreground and to syslog in the
// background, if there is one.
func newLogger(foreground bool) *log.Logger {
	if !foreground {
		if w, err := syslog.New(syslog.LOG_DAEMON|syslog.LOG_NOTICE, "rdmafs"); err == nil {
			return log.New(w, "", 0)
		}
		return log.New(io.Discard, "", 0)
	}
	return log.New(os.Stderr, "rdmafs: ", log.LstdFlags)
}
