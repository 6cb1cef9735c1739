package main

import (
	"slices"
	"strconv"
	"strings"
)

// The metrics of rdmafs stats -prometheus and -listen. What mountstats
// and node_exporter's mountstats collector both have goes out under the
// collector's names (node_mountstats_nfs_*), label names and units, so
// that a dashboard made for kernel NFS mounts shows rdmafs mounts as it
// shows those: labels export (the mount's source), mountaddr (the
// server's address), protocol (the first transport's: tcp or rdma), and
// operation (the NFS procedure) or transport (the number of the
// connection, from 0, as nconnect numbers them). What the collector
// lacks goes out as rdmafs_*, with the same labels: per-operation errors
// and latency histograms, the RPC-over-RDMA counters by name.
//
// Two rdmafs mounts of one export from one server make one set of series,
// as the kernel's mounts of one export share theirs: their counters
// added, their transports numbered one after the other, and a
// node_mountstats_nfs_mountpoint_info series for each mount point.

const nfsPrefix = "node_mountstats_nfs_"

// namedMetric maps a mountstats field onto a metric: the name, after
// nfsPrefix for the collector's, the type and what it counts.
type namedMetric struct {
	field, name string
	typ         promType
	help        string
}

// eventMetrics are the "events:" line's counters (fs/stats.go says what
// rdmafs counts for each), without congestionwait, which the collector
// has no series for and rdmafs does not count.
var eventMetrics = []namedMetric{
	{"inoderevalidates", "event_inode_revalidate_total", promCounter, "Attributes the kernel asked the mount for (FUSE GETATTR)."},
	{"dentryrevalidates", "event_dnode_revalidate_total", promCounter, "Directory entries revalidated; a FUSE revalidation is a lookup, so always 0."},
	{"datainvalidates", "event_data_invalidate_total", promCounter, "Opens that dropped the file's cached data (it changed or had none)."},
	{"attrinvalidates", "event_attribute_invalidate_total", promCounter, "Cached attributes invalidated; rdmafs lets them time out, so always 0."},
	{"vfsopen", "event_vfs_open_total", promCounter, "Files and directories opened or created."},
	{"vfslookup", "event_vfs_lookup_total", promCounter, "Names looked up in a directory."},
	{"vfspermission", "event_vfs_access_total", promCounter, "Permission checks the kernel asked for (FUSE ACCESS)."},
	{"vfsupdatepage", "event_vfs_update_page_total", promCounter, "Page updates; FUSE writes whole requests, so always 0."},
	{"vfsreadpage", "event_vfs_read_page_total", promCounter, "Single pages read; FUSE reads whole requests, so always 0."},
	{"vfsreadpages", "event_vfs_read_pages_total", promCounter, "Read requests through the page cache."},
	{"vfswritepage", "event_vfs_write_page_total", promCounter, "Single pages written; FUSE writes whole requests, so always 0."},
	{"vfswritepages", "event_vfs_write_pages_total", promCounter, "Write requests through the page cache."},
	{"vfsreaddir", "event_vfs_getdents_total", promCounter, "Directory reads (FUSE READDIR and READDIRPLUS)."},
	{"vfssetattr", "event_vfs_setattr_total", promCounter, "Attribute changes (chmod, chown, truncate, utimes)."},
	{"vfsflush", "event_vfs_flush_total", promCounter, "Flushes of open files (close of a descriptor)."},
	{"vfsfsync", "event_vfs_fsync_total", promCounter, "fsync and fdatasync of files and directories."},
	{"vfslock", "event_vfs_lock_total", promCounter, "Lock requests (GETLK, SETLK, SETLKW)."},
	{"vfsrelease", "event_vfs_file_release_total", promCounter, "Open files released (the last close)."},
	{"setattrtrunc", "event_truncation_total", promCounter, "Attribute changes that set the size of a file."},
	{"extendwrite", "event_write_extension_total", promCounter, "Writes past the end of a file; not counted, always 0."},
	{"sillyrenames", "event_silly_rename_total", promCounter, "Open files removed, renamed to .nfs* until closed."},
	{"shortreads", "event_short_read_total", promCounter, "Reads the server answered short; not counted, always 0."},
	{"shortwrites", "event_short_write_total", promCounter, "Writes the server answered short; not counted, always 0."},
	{"delay", "event_jukebox_delay_total", promCounter, "NFS3ERR_JUKEBOX delays; not counted, always 0."},
	{"pnfsreads", "event_pnfs_read_total", promCounter, "pNFS reads; NFSv4.1 only, always 0."},
	{"pnfswrites", "event_pnfs_write_total", promCounter, "pNFS writes; NFSv4.1 only, always 0."},
}

// byteMetrics are the "bytes:" line's counters.
var byteMetrics = []namedMetric{
	{"normalreadbytes", "read_bytes_total", promCounter, "Bytes of read requests through the page cache that reached rdmafs."},
	{"normalwritebytes", "write_bytes_total", promCounter, "Bytes of write requests through the page cache."},
	{"directreadbytes", "direct_read_bytes_total", promCounter, "Bytes of O_DIRECT read requests."},
	{"directwritebytes", "direct_write_bytes_total", promCounter, "Bytes of O_DIRECT write requests."},
	{"serverreadbytes", "total_read_bytes_total", promCounter, "Bytes of data of NFS READ replies."},
	{"serverwritebytes", "total_write_bytes_total", promCounter, "Bytes of data of NFS WRITE calls the server answered."},
	{"readpages", "read_pages_total", promCounter, "4 KiB pages of read requests through the page cache."},
	{"writepages", "write_pages_total", promCounter, "4 KiB pages of write requests through the page cache."},
}

// transportMetrics are the fields of every transport's line the
// collector has series for. A field a transport's line lacks (rdma has no
// max_slots, sending_u, pending_u) reads 0, as in the collector.
var transportMetrics = []namedMetric{
	{"bind_count", "transport_bind_total", promCounter, "Address resolutions or sockets bound for a connection."},
	{"connect_count", "transport_connect_total", promCounter, "Connections made to the server."},
	{"idle_time", "transport_idle_time_seconds", promGauge, "Seconds since the transport last carried a call."},
	{"sends", "transport_sends_total", promCounter, "Calls put on the wire, retransmissions included."},
	{"recvs", "transport_receives_total", promCounter, "Replies matched to a call."},
	{"bad_xids", "transport_bad_transaction_ids_total", promCounter, "Replies whose transaction ID matched no call in flight."},
	{"bklog_u", "transport_backlog_queue_total", promCounter, "Calls waiting for a slot or credit, summed at each send."},
	{"max_slots", "transport_maximum_rpc_slots", promGauge, "The most calls in flight at once (TCP)."},
	{"sending_u", "transport_sending_queue_total", promCounter, "Calls waiting to be sent, summed at each send (TCP)."},
	{"pending_u", "transport_pending_queue_total", promCounter, "Calls waiting for a reply, summed at each send (TCP)."},
}

// transportExtras are the fields of a transport's line the collector has
// no series for, under rdmafs's names: the RPC-over-RDMA counters of the
// "xprt: rdma" line by name, and two of every transport. A field not here
// nor in transportMetrics (port, and the kernel's rdma fields rdmafs does
// not count) is not exported.
var transportExtras = []namedMetric{
	{"connect_time", "rdmafs_transport_connect_time_seconds_total", promCounter, "Seconds spent making connections to the server."},
	{"req_u", "rdmafs_transport_active_requests_total", promCounter, "Calls in flight, summed at each send: over sends, the average in flight."},
	{"read_chunk_count", "rdmafs_rpcrdma_read_chunks_total", promCounter, "Calls sent with a read chunk: data (WRITE's, a long call) the server pulls with RDMA Read."},
	{"write_chunk_count", "rdmafs_rpcrdma_write_chunks_total", promCounter, "Calls that offered a write chunk: memory the server pushes READ data into with RDMA Write."},
	{"reply_chunk_count", "rdmafs_rpcrdma_reply_chunks_total", promCounter, "Calls that offered a reply chunk, for a reply too long to come inline."},
	{"total_rdma_request", "rdmafs_rpcrdma_read_chunk_bytes_total", promCounter, "Bytes the server pulled from read chunks."},
	{"total_rdma_reply", "rdmafs_rpcrdma_write_reply_chunk_bytes_total", promCounter, "Bytes the server pushed into write and reply chunks."},
	{"pullup_copy_count", "rdmafs_rpcrdma_pullup_copy_bytes_total", promCounter, "Call bytes copied into a Send or a staging buffer."},
	{"hardway_register_count", "rdmafs_rpcrdma_hardway_registrations_total", promCounter, "Memory registrations made for a single call (memreg=register)."},
	{"failed_marshal_count", "rdmafs_rpcrdma_failed_marshals_total", promCounter, "Calls that could not be encoded for sending."},
	{"bad_reply_count", "rdmafs_rpcrdma_bad_replies_total", promCounter, "Replies that broke the RPC-over-RDMA protocol, RDMA_ERROR included."},
	{"nomsg_call_count", "rdmafs_rpcrdma_nomsg_calls_total", promCounter, "Calls sent whole in a read chunk (RDMA_NOMSG)."},
	{"mrs_recycled", "rdmafs_rpcrdma_mw_rebinds_total", promCounter, "Memory windows bound again for another call's memory."},
	{"mrs_allocated", "rdmafs_rpcrdma_mw_allocations_total", promCounter, "Memory windows allocated."},
	{"local_inv_needed", "rdmafs_rpcrdma_local_invalidations_total", promCounter, "Local invalidations posted to revoke the server's access to a call's memory."},
	{"empty_sendctx_q", "rdmafs_rpcrdma_credit_waits_total", promCounter, "Calls that waited for a credit: as many calls were out as the server granted."},
	{"payload_copies", "rdmafs_rpcrdma_payload_copies_total", promCounter, "Read chunk payloads copied because they lay outside the transport's registered buffers."},
	{"registered_bytes", "rdmafs_rpcrdma_registered_bytes", promGauge, "Bytes of buffers the transport has registered (pinned) with the device now."},
	{"registered_peak_bytes", "rdmafs_rpcrdma_registered_peak_bytes", promGauge, "The most bytes of buffers registered at once since the mount."},
	{"credits_granted", "rdmafs_rpcrdma_credits_granted", promGauge, "Credits the server grants now: how many calls may be in flight at once."},
	{"write_chunks_placed", "rdmafs_rpcrdma_write_chunks_placed_total", promCounter, "Write chunks offered in a FUSE io_uring entry's buffer: READ data the server placed where the kernel takes it, copied by nobody in rdmafs."},
}

// reconnectsMetric is connect_count less the first connection.
const (
	reconnectsMetric = "rdmafs_transport_reconnects_total"
	reconnectsHelp   = "Connections made after the first: the transport lost its connection and made a new one."
)

// Per-operation series: the collector's from the per-op line, and
// rdmafs's errors and histograms.
var opMetrics = []struct {
	field int // in opFieldNames
	name  string
	help  string
	msec  bool // milliseconds in mountstats, seconds here
}{
	{0, "operations_requests_total", "Calls of the operation made.", false},
	{1, "operations_transmissions_total", "Times calls of the operation were sent, retransmissions included.", false},
	{2, "operations_major_timeouts_total", "Tries of calls of the operation that got no reply in time.", false},
	{3, "operations_sent_bytes_total", "Bytes of calls of the operation sent, RPC headers and data.", false},
	{4, "operations_received_bytes_total", "Bytes of replies to calls of the operation, RPC headers and data.", false},
	{5, "operations_queue_time_seconds_total", "Seconds calls of the operation waited before their last transmission.", true},
	{6, "operations_response_time_seconds_total", "Seconds from the last transmission of calls of the operation to their reply.", true},
	{7, "operations_request_time_seconds_total", "Seconds calls of the operation took from start to end.", true},
}

const (
	opErrorsMetric  = "rdmafs_nfs_operations_errors_total"
	opErrorsHelp    = "Calls of the operation that ended in an RPC error (no reply on a soft mount, a refused or broken reply, an interrupted call)."
	rttHistMetric   = "rdmafs_nfs_operation_rtt_seconds"
	rttHistHelp     = "Round trips of calls of the operation that got a reply, from the last transmission to the reply, in seconds: node_mountstats_nfs_operations_response_time_seconds_total by bucket."
	execHistMetric  = "rdmafs_nfs_operation_execute_seconds"
	execHistHelp    = "Every call of the operation from start to end, in seconds: node_mountstats_nfs_operations_request_time_seconds_total by bucket; its count is the operation's requests."
	ageMetric       = "age_seconds_total"
	ageHelp         = "Seconds since the mount."
	mountpointInfo  = "mountpoint_info"
	mountpointHelp  = "1 for each mount point of the export: its labels say where it is mounted."
	exportLabel     = "export"
	mountaddrLabel  = "mountaddr"
	protocolLabel   = "protocol"
	operationLabel  = "operation"
	transportLabel  = "transport"
	mountpointLabel = "mountpoint"
)

// mountMetrics is what rdmafs stats read of one mount.
type mountMetrics struct {
	stats   mountStats
	latency *latencyStats // nil: a mount by an rdmafs without histograms
}

// mountAddr is the server's address of a mount, the collector's
// mountaddr label: the addr= option if the mount has one, else the host
// of its source, as written (host:/path, [v6]:/path).
func mountAddr(m *mountStats) string {
	for _, o := range strings.Split(m.Opts, ",") {
		if v, ok := strings.CutPrefix(o, "addr="); ok {
			return v
		}
	}
	host := m.Device
	if i := strings.LastIndex(host, ":/"); i >= 0 {
		host = host[:i]
	} else if i := strings.LastIndexByte(host, ':'); i >= 0 {
		host = host[:i]
	}
	return strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
}

// protocolOf is the collector's protocol label: the first transport's.
func protocolOf(m *mountStats) string {
	if len(m.Xprts) == 0 {
		return ""
	}
	return m.Xprts[0].Proto
}

// mergeMount adds src's counters to dst's, for two mounts of one export:
// events, bytes and operations added by name, the age the older's,
// transports one after the other.
func mergeMount(dst, src *mountMetrics) {
	d, s := &dst.stats, &src.stats
	d.Age = max(d.Age, s.Age)
	d.Events = addCounters(d.Events, s.Events)
	d.Bytes = addCounters(d.Bytes, s.Bytes)
	d.Xprts = append(d.Xprts, s.Xprts...)
	for _, o := range s.Ops {
		i := opIndex(d.Ops, o.Name)
		if i < 0 {
			d.Ops = append(d.Ops, o)
			continue
		}
		for j := range o.Fields {
			d.Ops[i].Fields[j] += o.Fields[j]
		}
	}
	switch {
	case src.latency == nil:
	case dst.latency != nil && !slices.Equal(dst.latency.BoundsNs, src.latency.BoundsNs):
		// Histograms of other buckets (rdmafs versions apart) do not add
		// up: the first mount's stand.
	case dst.latency == nil:
		dst.latency = src.latency.clone()
	default:
		for _, o := range src.latency.clone().Ops {
			if d := dst.latency.op(o.Name); d != nil {
				d.RTT.add(&o.RTT)
				d.Execute.add(&o.Execute)
			} else {
				dst.latency.Ops = append(dst.latency.Ops, o)
			}
		}
	}
}

func opIndex(ops []opStats, name string) int {
	for i := range ops {
		if ops[i].Name == name {
			return i
		}
	}
	return -1
}

// addCounters returns a with b's values added by name.
func addCounters(a, b []counter) []counter {
	out := append([]counter(nil), a...)
	for _, c := range b {
		found := false
		for i := range out {
			if out[i].Name == c.Name {
				out[i].Value += c.Value
				found = true
				break
			}
		}
		if !found {
			out = append(out, c)
		}
	}
	return out
}

// promMetrics returns the metrics of the mounts, in their order.
func promMetrics(mounts []mountMetrics) *promSet {
	set := newPromSet()
	type key struct{ export, addr, proto string }
	var order []key
	merged := make(map[key]*mountMetrics)
	for i := range mounts {
		m := &mounts[i]
		k := key{m.stats.Device, mountAddr(&m.stats), protocolOf(&m.stats)}
		set.add(nfsPrefix+mountpointInfo, mountpointHelp, promGauge, []label{
			{exportLabel, k.export}, {mountaddrLabel, k.addr}, {mountpointLabel, m.stats.Mountpoint}, {protocolLabel, k.proto},
		}, "1")
		if d := merged[k]; d != nil {
			mergeMount(d, m)
			continue
		}
		c := *m
		c.stats.Xprts = append([]xprt(nil), m.stats.Xprts...)
		c.stats.Ops = append([]opStats(nil), m.stats.Ops...)
		c.latency = m.latency.clone()
		merged[k] = &c
		order = append(order, k)
	}
	for _, k := range order {
		addMountMetrics(set, merged[k], []label{{exportLabel, k.export}, {mountaddrLabel, k.addr}, {protocolLabel, k.proto}})
	}
	return set
}

// addMountMetrics adds one export's series, labelled base.
func addMountMetrics(set *promSet, mm *mountMetrics, base []label) {
	m := &mm.stats
	set.add(nfsPrefix+ageMetric, ageHelp, promCounter, base, formatUint(m.Age))
	for _, bm := range byteMetrics {
		set.add(nfsPrefix+bm.name, bm.help, bm.typ, base, formatUint(value(m.Bytes, bm.field)))
	}
	for _, em := range eventMetrics {
		set.add(nfsPrefix+em.name, em.help, em.typ, base, formatUint(value(m.Events, em.field)))
	}
	for i, x := range m.Xprts {
		labels := withLabel(base, transportLabel, strconv.Itoa(i))
		for _, tm := range transportMetrics {
			set.add(nfsPrefix+tm.name, tm.help, tm.typ, labels, formatUint(value(x.Fields, tm.field)))
		}
		for _, tm := range transportExtras {
			if hasCounter(x.Fields, tm.field) {
				set.add(tm.name, tm.help, tm.typ, labels, formatUint(value(x.Fields, tm.field)))
			}
		}
		set.add(reconnectsMetric, reconnectsHelp, promCounter, labels, formatUint(sub(value(x.Fields, "connect_count"), 1)))
	}
	var bounds []float64
	if mm.latency != nil {
		for _, b := range mm.latency.BoundsNs {
			bounds = append(bounds, float64(b)/1e9)
		}
	}
	for _, o := range m.Ops {
		labels := withLabel(base, operationLabel, o.Name)
		for _, om := range opMetrics {
			v := formatUint(o.Fields[om.field])
			if om.msec {
				v = formatFloat(float64(o.Fields[om.field]) / 1000)
			}
			set.add(nfsPrefix+om.name, om.help, promCounter, labels, v)
		}
		set.add(opErrorsMetric, opErrorsHelp, promCounter, labels, formatUint(o.Fields[8]))
		if l := mm.latency.op(o.Name); l != nil {
			set.addHistogram(rttHistMetric, rttHistHelp, labels, bounds, l.RTT.Counts, float64(l.RTT.SumNs)/1e9)
			set.addHistogram(execHistMetric, execHistHelp, labels, bounds, l.Execute.Counts, float64(l.Execute.SumNs)/1e9)
		}
	}
}

func hasCounter(cs []counter, name string) bool {
	for _, c := range cs {
		if c.Name == name {
			return true
		}
	}
	return false
}
