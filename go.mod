module github.com/rdmafs/rdmafs

go 1.26.0

require (
	github.com/hanwen/go-fuse/v2 v2.12.1
	github.com/rasky/go-xdr v0.0.0-20170124162913-1a41d1a06c93
	golang.org/x/sys v0.50.0
)
