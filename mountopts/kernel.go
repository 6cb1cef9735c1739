package mountopts

// mirrors says, for each option of the table (by its first name), which
// option of the Linux kernel or of the mount tools it stands for: an
// nfs(5) mount option of the kernel NFS client, a sysctl of the kernel's
// RPC-over-RDMA client (/proc/sys/sunrpc/...), a FUSE mount option, a
// mount(8) flag or an fstab(5) word. The man page shows it next to each
// option; a test keeps it and the table in step.
var mirrors = map[string]string{
	"vers":       "nfs(5) vers, nfsvers",
	"proto":      "nfs(5) proto",
	"tcp":        "nfs(5) tcp, rdma",
	"port":       "nfs(5) port",
	"mountport":  "nfs(5) mountport",
	"mountproto": "nfs(5) mountproto",
	"rsize":      "nfs(5) rsize",
	"wsize":      "nfs(5) wsize",
	"timeo":      "nfs(5) timeo",
	"retrans":    "nfs(5) retrans",
	"hard":       "nfs(5) hard, soft",
	"nconnect":   "nfs(5) nconnect",
	"sec":        "nfs(5) sec",
	"resvport":   "nfs(5) resvport, noresvport",
	"retry":      "nfs(5) retry",
	"acl":        "nfs(5) acl, noacl",

	"ac":          "nfs(5) ac, noac",
	"acregmin":    "nfs(5) acregmin",
	"acregmax":    "nfs(5) acregmax",
	"acdirmin":    "nfs(5) acdirmin",
	"acdirmax":    "nfs(5) acdirmax",
	"actimeo":     "nfs(5) actimeo",
	"lookupcache": "nfs(5) lookupcache",
	"cto":         "nfs(5) cto, nocto",
	"rdirplus":    "nfs(5) rdirplus, nordirplus",
	"rw":          "mount(8) rw, ro",
	"async":       "mount(8) async, sync",

	"slot_table_entries":   "sysctl sunrpc.rdma_slot_table_entries",
	"max_inline_read":      "sysctl sunrpc.rdma_max_inline_read",
	"max_inline_write":     "sysctl sunrpc.rdma_max_inline_write",
	"inline_write_padding": "sysctl sunrpc.rdma_inline_write_padding",
	"memreg":               "sysctl sunrpc.rdma_memreg_strategy",
	"provider":             "none: rdmafs's own",

	"allow_other":         "FUSE allow_other (mount.fuse3(8))",
	"default_permissions": "FUSE default_permissions (mount.fuse3(8))",
	"fsname":              "FUSE fsname (mount.fuse3(8))",
	"max_read":            "FUSE max_read (mount.fuse3(8))",
	"debug":               "FUSE debug (mount.fuse3(8))",
	"noio_uring":          "libfuse io_uring, noio_uring (FUSE over io_uring)",
	"io_uring_q_depth":    "libfuse io_uring_q_depth",

	"uid": "none: rdmafs's own (the kernel client always sends the caller's)",
	"gid": "none: rdmafs's own (the kernel client always sends the caller's)",

	"lock":       "nfs(5) lock, nolock",
	"local_lock": "nfs(5) local_lock",
	"dev":        "mount(8) dev, nodev",
	"suid":       "mount(8) suid, nosuid",
	"exec":       "mount(8) exec, noexec",
	"relatime":   "mount(8) relatime, noatime, strictatime, atime, norelatime",
	"diratime":   "mount(8) diratime, nodiratime",
	"nolazytime": "mount(8) lazytime, nolazytime",
	"defaults":   "fstab(5) and mount(8); intr, nointr and fg: nfs(5)",
	"x-":         "mount(8) x-*, systemd.mount(5)",
	"comment":    "mount(8) comment",
	"bg":         "nfs(5)",
	"udp":        "nfs(5) udp",
}

// mirrorOf returns what opt mirrors.
func mirrorOf(opt *option) string { return mirrors[opt.names[0]] }
