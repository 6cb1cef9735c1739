package fs

import (
	"bufio"
	"io"
)

// LatencyXattr is the extended attribute of the mount's root directory
// that holds the latency histograms of every NFS procedure
// (sunrpc.Client.WriteLatency): what mountstats has only as totals.
// `rdmafs stats -prometheus` reads it next to StatsXattr.
const LatencyXattr = "user.rdmafs.latency"

// WriteLatency writes the mount's latency histograms in the format of
// sunrpc.Client.WriteLatency.
func (f *FS) WriteLatency(w io.Writer) error {
	b := bufio.NewWriter(w)
	if err := f.nfs.RPC().WriteLatency(b); err != nil {
		return err
	}
	return b.Flush()
}

// writeRootXattr writes the value of the root's extended attribute attr,
// one of StatsXattr and LatencyXattr; ok is false for any other name.
func (f *FS) writeRootXattr(w io.Writer, attr string) (ok bool, err error) {
	switch attr {
	case StatsXattr:
		return true, f.WriteStats(w, f.cfg.Mountpoint)
	case LatencyXattr:
		return true, f.WriteLatency(w)
	}
	return false, nil
}
