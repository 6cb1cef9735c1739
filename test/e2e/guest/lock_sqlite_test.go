package guest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// sqliteTxnsEnv names how many transactions each of the two processes of
// TestLockSQLiteTwoMounts commits: sqliteTxns unless it says. A thousand
// take about five minutes per pair in the TCG guest, so `make e2e` runs
// fewer and `make e2e-soak` 500 each.
const sqliteTxnsEnv = "RDMAFS_LOCK_SQLITE_TXNS"

const sqliteTxns = 100

// sqliteRoundsEnv names how many times in a row the rdmafs+rdmafs pair
// runs, each time on new mounts and a new database: once unless it says
// (`make e2e-soak`: 20, where CI once saw that pair fail with a disk I/O
// error after about 35 transactions, and reruns passed).
const sqliteRoundsEnv = "RDMAFS_LOCK_SQLITE_ROUNDS"

// sqliteStraceEnv, set to 1, runs the two sqlite3 processes under strace,
// which a failure then shows the failed system calls of: SQLite says
// "disk I/O error" for a read, a write or an fsync that failed, and which
// and with what errno only strace tells. (`make e2e-soak` sets it.)
const sqliteStraceEnv = "RDMAFS_LOCK_SQLITE_STRACE"

// TestLockSQLiteTwoMounts: two sqlite3 processes, each on a mount of its
// own of one database, add one to a counter row sqliteTxns times each, every
// time in a transaction of its own under SQLite's own locking (fcntl
// locks on the database file; a busy timeout retries a lock the other
// holds): the counter ends at exactly twice that and PRAGMA integrity_check
// says ok, for the kernel client with rdmafs and for two rdmafs mounts.
// Without locks shared through the server, both would read the same
// value and one of the two updates would be lost, or the file torn.
func TestLockSQLiteTwoMounts(t *testing.T) {
	e := lockLab(t)
	if _, err := exec.LookPath("sqlite3"); err != nil {
		t.Fatalf("sqlite3 is not in the guest (test/e2e/packages.txt): %v", err)
	}
	txns := sqliteTxns
	if n, err := strconv.Atoi(os.Getenv(sqliteTxnsEnv)); err == nil && n > 0 {
		txns = n
	}
	rounds := 1
	if n, err := strconv.Atoi(os.Getenv(sqliteRoundsEnv)); err == nil && n > 0 {
		rounds = n
	}
	names := []string{"kernel+rdmafs"}
	for i := range rounds {
		name := "rdmafs+rdmafs"
		if rounds > 1 {
			name += fmt.Sprintf("/round-%d", i+1)
		}
		names = append(names, name)
	}
	for _, subtest := range names {
		pair, _, _ := strings.Cut(subtest, "/")
		t.Run(subtest, func(t *testing.T) {
			name := "lock-sqlite-" + strings.ReplaceAll(pair, "+", "-") + ".db"
			db := filepath.Join(e.Export, name)
			t.Cleanup(func() { os.Remove(db); os.Remove(db + "-journal") })
			run(t, time.Minute, "sqlite3", db, "CREATE TABLE counter (n INTEGER); INSERT INTO counter VALUES (0);")
			var first string
			if pair == "kernel+rdmafs" {
				first = mountKernel(t, e, "tcp")
			} else {
				first = mountRdmafs(t, e, "lock")
			}
			second := mountRdmafs(t, e, "lock")
			t.Cleanup(func() {
				// Before the unmounts: which NFS operations failed.
				if t.Failed() {
					for _, dir := range []string{first, second} {
						out, _ := exec.Command(e.Rdmafs, "stats", dir).CombinedOutput()
						t.Logf("rdmafs stats %s:\n%s", dir, out)
					}
				}
			})
			strace := os.Getenv(sqliteStraceEnv) == "1"

			var script strings.Builder
			// .log: on an error SQLite says which system call of which
			// file failed with which errno, and the extended result
			// code; the error alone says "disk I/O error (10)".
			script.WriteString(".bail on\n.log stderr\n.timeout 300000\n")
			for range txns {
				script.WriteString("BEGIN IMMEDIATE; UPDATE counter SET n = n + 1; COMMIT;\n")
			}
			start := time.Now()
			var cmds []*exec.Cmd
			var traces []string
			for i, dir := range []string{first, second} {
				cmd := exec.Command("sqlite3", filepath.Join(dir, name))
				if strace {
					trace := filepath.Join(t.TempDir(), fmt.Sprintf("strace-%d", i))
					traces = append(traces, trace)
					// -Z: the calls that failed, with their errno and
					// (-y) their file; the lock calls, which fail with
					// EAGAIN by the hundred, are not stopped at
					// (--seccomp-bpf), which keeps the pace.
					cmd = exec.Command("strace", "-f", "-Z", "-y", "-tt", "--seccomp-bpf", "-o", trace,
						"-e", "trace=read,pread64,write,pwrite64,fsync,fdatasync,ftruncate,openat,unlink,access,newfstatat,fstat",
						"sqlite3", filepath.Join(dir, name))
				}
				cmd.Stdin = strings.NewReader(script.String())
				cmds = append(cmds, cmd)
			}
			t.Cleanup(func() {
				if t.Failed() {
					for _, trace := range traces {
						b, _ := os.ReadFile(trace)
						t.Logf("%s, the failed calls:\n%s", trace, b)
					}
				}
			})
			runTogether(t, 15*time.Minute, cmds...)
			took := time.Since(start)
			got := strings.TrimSpace(run(t, time.Minute, "sqlite3", db, "SELECT n FROM counter;"))
			if want := fmt.Sprint(2 * txns); got != want {
				t.Errorf("counter = %s after 2 × %d transactions, want %s", got, txns, want)
			}
			if check := strings.TrimSpace(run(t, time.Minute, "sqlite3", db, "PRAGMA integrity_check;")); check != "ok" {
				t.Errorf("PRAGMA integrity_check: %s", check)
			}
			t.Logf("%s: %d transactions in %v", pair, 2*txns, took.Round(time.Millisecond))
		})
	}
}
