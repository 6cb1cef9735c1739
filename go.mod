module github.com/rdmafs/rdmafs

go 1.26.0

require (
	github.com/go-git/go-billy/v5 v5.6.0
	github.com/hanwen/go-fuse/v2 v2.12.1
	github.com/rasky/go-xdr v0.0.0-20170124162913-1a41d1a06c93
	github.com/willscott/go-nfs v0.0.4
	golang.org/x/sys v0.50.0
)

require (
	github.com/cyphar/filepath-securejoin v0.2.5 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/hashicorp/golang-lru/v2 v2.0.7 // indirect
	github.com/willscott/go-nfs-client v0.0.0-20240104095149-b44639837b00 // indirect
)
