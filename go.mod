module github.com/rdmafs/rdmafs

go 1.26
