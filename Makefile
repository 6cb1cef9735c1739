# rdmafs
#   make install     bin/rdmafs into $(PREFIX)/sbin, rdmafs(8) into $(PREFIX)/share/man/man8
#                    (PREFIX=/usr/local, DESTDIR for staging); make uninstall removes them
#   make man         docs/rdmafs.8 from the option table (make test checks it is up to date)
#   make demo        set up, build, and show rdmafs at work on this machine (root)
#   make build       bin/rdmafs
#   make test        unit, fuzz-seed and host end-to-end tests, with the race detector (root for the host tests)
#   make bench       TCP benchmark on this machine: rdmafs vs libnfs vs a FUSE loopback (root)
#   make e2e         end-to-end tests in a qemu guest with SoftRoCE and knfsd (root; test/e2e/README.md)
#   make e2e-current the same tests on the newest kernel of Debian's trixie-backports (Linux 7.x)
#                    instead of Debian 12's 6.1 (LAB_KERNEL=current)
#   make e2e-soak    the differential test (40 random scripts), the exerciser (40000 operations),
#                    the lock model (1000 steps, new seed) and SQLite (2 × 500 transactions, the
#                    rdmafs pair 20 times, under strace)
#                    in the guest, longer than CI runs them
#   make bench-e2e   fio through rdmafs and the kernel NFS client over RDMA and TCP, in one guest boot
#   make bench-verbs the verbs layer: the soft provider here, then ibverbs next to perftest on
#                    SoftRoCE in the guest
#   make e2e-docker  the Dockerfile built and run with docker.io in a guest: the same e2e tests
# Knobs of e2e and bench-e2e are environment variables (LAB_*, BENCH_*: test/e2e/README.md);
# E2E_FLAGS go to the test binary (e.g. E2E_FLAGS='-test.run TestKernel'), BENCH_FLAGS to bench-e2e.

GO ?= go

# Debian packages the build and the host tests need: fuse3 for the mounts,
# the RDMA headers for cgo, fio and libnfs-utils for the benchmark and the
# libnfs test of rdmafs serve, nfs-common (showmount, with rpcbind; and
# mountstats, which the stats tests read rdmafs stats with), iproute2 for
# the showmount test (run in a namespace of its own), groff-base, which
# renders the man page in its test, prometheus (promtool) and
# prometheus-node-exporter, which read rdmafs stats -prometheus in the
# metrics tests (installed, their services are not started: the tests
# run node_exporter on a loopback port of their own), acl (setfacl,
# getfacl) for the ACL tests, and nfs-ganesha with its VFS back end, the
# second real NFS server of the host tests (package test/ganesha starts it
# in a network namespace of the test's own; its service is not started).
HOST_PACKAGES = fuse3 gcc libc6-dev pkg-config libibverbs-dev librdmacm-dev fio libnfs-utils nfs-common iproute2 groff-base \
	prometheus prometheus-node-exporter acl nfs-ganesha nfs-ganesha-vfs

.PHONY: deps demo build install uninstall man test bench bench-verbs e2e e2e-current e2e-soak bench-e2e e2e-build e2e-image e2e-shell e2e-docker

deps:
	@missing=$$(for p in $(HOST_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "installing $$missing"; \
		apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $$missing; \
	fi

build: deps
	$(GO) build -o bin/rdmafs ./cmd/rdmafs

# Where make install puts rdmafs. mount(8) runs mount.fuse3, and so rdmafs,
# with the fixed PATH below whatever the caller's (util-linux, Debian 12), so
# mount -t fuse.rdmafs and fstab find rdmafs only in one of its directories.
PREFIX ?= /usr/local
SBINDIR ?= $(PREFIX)/sbin
MANDIR ?= $(PREFIX)/share/man
HELPER_PATH = /usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

install: build
	@case ":$(HELPER_PATH):" in *":$(SBINDIR):"*) ;; \
	*) echo "warning: $(SBINDIR) is not in mount(8)'s helper PATH ($(HELPER_PATH)):" \
		"mount -t fuse.rdmafs and fstab will not find rdmafs there" >&2 ;; esac
	install -d $(DESTDIR)$(SBINDIR) $(DESTDIR)$(MANDIR)/man8
	install -m 755 bin/rdmafs $(DESTDIR)$(SBINDIR)/rdmafs
	install -m 644 docs/rdmafs.8 $(DESTDIR)$(MANDIR)/man8/rdmafs.8

uninstall:
	rm -f $(DESTDIR)$(SBINDIR)/rdmafs $(DESTDIR)$(MANDIR)/man8/rdmafs.8

man:
	$(GO) test ./cmd/rdmafs -run '^TestManPage$$' -update-man

demo: build
	./demo.sh bin/rdmafs

# The race detector runs over every package: a race fails the tests. The
# allocation tests run again without it, which makes sync.Pool drop items.
# The tests build with the rdmafs_scrub tag: a receive buffer going back to
# its pool is overwritten with garbage (sunrpc/xdr/scrub.go), so a view of
# a message kept past its call, which the race detector cannot see, fails
# them; the host tests build rdmafs with it too. The allocation tests, and
# vet once more, see the build without it.
test: deps
	$(GO) vet ./...
	$(GO) vet -tags rdmafs_scrub ./...
	# The host end-to-end tests build rdmafs when they run: Go's test cache
	# cannot see a change to it, so they never come from the cache.
	$(GO) test -race -tags rdmafs_scrub $$($(GO) list ./... | grep -v '/test/e2e/host$$')
	$(GO) test -race -tags rdmafs_scrub -count=1 -timeout 30m ./test/e2e/host
	$(GO) test -count=1 -run 'NotAllocate' ./nfs3 ./sunrpc/xdr ./bench/roundtrip

bench: build
	$(GO) run ./bench/hostbench
	$(GO) run ./bench/fusechannel

e2e:
	test/e2e/lab.sh e2e $(E2E_FLAGS)

# rdmafs, knfsd and the kernel NFS/RDMA client of a current kernel (test/e2e/README.md)
e2e-current:
	LAB_KERNEL=current test/e2e/lab.sh e2e $(E2E_FLAGS)

# the differential test, the exerciser and the lock model and SQLite tests at length, in one guest boot (not in CI)
e2e-soak:
	RDMAFS_DIFF_SEED=$${RDMAFS_DIFF_SEED:-random} RDMAFS_DIFF_SCRIPTS=$${RDMAFS_DIFF_SCRIPTS:-40} RDMAFS_EXERCISER_OPS=$${RDMAFS_EXERCISER_OPS:-40000} \
	RDMAFS_LOCK_MODEL_SEED=$${RDMAFS_LOCK_MODEL_SEED:-random} RDMAFS_LOCK_MODEL_OPS=$${RDMAFS_LOCK_MODEL_OPS:-1000} RDMAFS_LOCK_SQLITE_TXNS=$${RDMAFS_LOCK_SQLITE_TXNS:-500} \
	RDMAFS_LOCK_SQLITE_ROUNDS=$${RDMAFS_LOCK_SQLITE_ROUNDS:-20} RDMAFS_LOCK_SQLITE_STRACE=$${RDMAFS_LOCK_SQLITE_STRACE:-1} \
	LAB_TEST_TIMEOUT=$${LAB_TEST_TIMEOUT:-230m} LAB_TIMEOUT=$${LAB_TIMEOUT:-14400} \
		test/e2e/lab.sh e2e -test.run 'TestDifferential|TestExerciserKnfsd|TestLockModel|TestLockSQLite'

bench-e2e:
	test/e2e/lab.sh bench $(BENCH_FLAGS)

bench-verbs: deps
	$(GO) run ./bench/verbs -provider soft
	test/e2e/lab.sh bench-verbs

# the pieces of e2e: the binaries, the cached guest image, a shell in the guest
e2e-build:
	test/e2e/build.sh bin

e2e-image:
	test/e2e/lab.sh image

e2e-shell:
	test/e2e/lab.sh shell

# the Docker image: docker build of the Dockerfile and docker run of the e2e tests, with
# Debian's docker.io, in a guest of its own (base images made locally: no registry);
# longer than make e2e (test/e2e/README.md, Docker), so not part of it
e2e-docker:
	test/e2e/lab.sh docker $(E2E_FLAGS)
