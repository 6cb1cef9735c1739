// Package fusedev answers a FUSE mount's requests on /dev/fuse with a
// fuse.ProtocolServer, go-fuse's transport-independent entry point, read
// by a fixed number of goroutines that rdmafs chooses.
//
// go-fuse's fuse.Server mounts and answers INIT; its own request loop
// never runs. That loop lets as many goroutines wait for requests as
// GOMAXPROCS was when the server was made, and ends the goroutine that
// finished a request when that many wait already: right for handlers
// busy on the CPU, wrong for rdmafs's, which wait on the network (with
// two CPUs and 16 calls in flight, nearly every request ended its
// goroutine, and the next one's small stack grew again on the way down
// to the RPC). Here the readers stay.
//
// The io_uring channel (fs/fuseuring) uses the same loop, with fewer
// readers, for what the kernel still sends on /dev/fuse, and the same
// protocol server, so that an INTERRUPT finds the request it is for.
//
//	loop.go         the readers: read a request, answer it, write the reply
//	init.go         the protocol server set up as fuse.Server was by INIT
//	descriptors.go  the process's /dev/fuse descriptors, to tell a mount's
package fusedev
