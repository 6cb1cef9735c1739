// Package guest holds the rdmafs end-to-end tests that run inside the e2e test
// system: the qemu guest that `make e2e` boots (test/e2e/lab.sh), or the Docker
// container (Dockerfile), where test/e2e/setup-services.sh has set up a SoftRoCE
// device and knfsd exporting a tmpfs over TCP (2049) and RDMA (20049).
//
// The tests are built with `go test -c` by test/e2e/build.sh and started by
// test/e2e/run-tests.sh, which passes the setup through the environment
// (LAB_ADDR, LAB_EXPORT, LAB_RXE, RDMAFS_BIN, LAB_VERBS_TESTS, LAB_ROOT).
// Elsewhere (`go test ./...` on a host) every test skips.
package guest
