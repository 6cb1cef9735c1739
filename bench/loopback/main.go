// Command loopback mounts a directory again through go-fuse's loopback file
// system, with the FUSE settings rdmafs uses. It is the FUSE ceiling in the
// benchmark: the same kernel path and go-fuse as rdmafs, with no network
// and no NFS behind it.
//
//	loopback DIR MOUNTPOINT
package main

import (
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: loopback DIR MOUNTPOINT")
		os.Exit(2)
	}
	root, err := gofs.NewLoopbackRoot(os.Args[1])
	if err != nil {
		log.Fatal(err)
	}
	sec := time.Second
	server, err := gofs.Mount(os.Args[2], root, &gofs.Options{
		MountOptions: fuse.MountOptions{
			MaxWrite:      1 << 20,
			MaxBackground: 64,
			DirectMount:   true,
			FsName:        "loopback",
			Name:          "loopback",
		},
		AttrTimeout:  &sec,
		EntryTimeout: &sec,
	})
	if err != nil {
		log.Fatal(err)
	}
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-signals
		server.Unmount()
	}()
	fmt.Println("ready")
	server.Wait()
}
