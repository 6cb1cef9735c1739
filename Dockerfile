# rdmafs end-to-end tests in a privileged container, for hosts whose kernel has
# rdma_rxe (SoftRoCE), nfsd with RDMA (rpcrdma) and fuse. See test/e2e/README.md.
#
#   docker build -t rdmafs-e2e .
#   docker run --rm --privileged --network host -v /lib/modules:/lib/modules:ro rdmafs-e2e
#
# The entrypoint creates an rxe device on a dummy interface, starts knfsd
# exporting a tmpfs /export over TCP 2049 and RDMA 20049, runs the e2e tests and
# tears the setup down; the exit status is the tests'. It refuses to start where
# the host already runs rpcbind or knfsd: then test against that server with
# LAB_KNFSD=0 (test/e2e/README.md). Every step runs a script that the qemu harness (make e2e) runs
# too: build.sh (binaries), install-packages.sh (packages.txt), setup-services.sh
# (rxe, knfsd) and run-tests.sh (the tests).
#
# Where no registry is reachable, the two base images can be local ones, named by the
# ARGs GO_IMAGE and DEBIAN_IMAGE: make e2e-docker imports them from root filesystems it
# makes (test/e2e/lab.sh docker) and builds and runs this file with docker.io in a guest.

# The base images (ARGs of FROM lines come before the first FROM).
ARG GO_IMAGE=golang:1.26-bookworm
ARG DEBIAN_IMAGE=debian:bookworm

# Build stage: Debian 12 with the Go toolchain of go.mod; build.sh installs the
# C build dependencies (gcc, libibverbs-dev, librdmacm-dev) itself.
FROM ${GO_IMAGE} AS build
WORKDIR /src
COPY . .
RUN test/e2e/build.sh /src/bin

# Test stage: the packages of the e2e test system, then the binaries, and the Makefile
# and man page that the install test (TestInstallFstab) installs with make install.
FROM ${DEBIAN_IMAGE}
COPY test/e2e/packages.txt test/e2e/install-packages.sh /src/test/e2e/
RUN /src/test/e2e/install-packages.sh
COPY test/e2e/ /src/test/e2e/
COPY Makefile /src/
COPY docs/ /src/docs/
COPY --from=build /src/bin/ /src/bin/
WORKDIR /src
# Run with --network host: rdma_rxe of Linux 6.1 works in the initial network
# namespace only. The entrypoint then adds, on the host, the dummy interface
# e2edummy0 with 10.11.0.1/32 (LAB_ADDR) and rxe_e2e on it, and removes both at the end.
ENV LAB_DUMMY=e2edummy0 LAB_RXE=rxe_e2e
ENTRYPOINT ["/src/test/e2e/setup-services.sh"]
CMD ["/src/test/e2e/run-tests.sh"]
