//go:build cgo && linux

#include <errno.h>
#include <string.h>
#include <netinet/in.h>
#include "helpers.h"

int rdmafs_query_port(struct ibv_context *ctx, uint8_t port, struct ibv_port_attr *attr)
{
	return ibv_query_port(ctx, port, attr);
}

struct ibv_mw *rdmafs_alloc_mw(struct ibv_pd *pd)
{
	return ibv_alloc_mw(pd, IBV_MW_TYPE_2);
}

int rdmafs_dealloc_mw(struct ibv_mw *mw)
{
	return ibv_dealloc_mw(mw);
}

// rdmafs_post_send posts s[0..n) with one ibv_post_send, linked in that
// order, and returns how many the device took: n, or on an error (errno
// then says which) those before the one bad_wr names.
int rdmafs_post_send(struct ibv_qp *qp, struct rdmafs_send *s, int n)
{
	struct ibv_send_wr wr[RDMAFS_MAX_CHAIN], *bad = NULL;
	int i, ret, posted;

	if (n < 1 || n > RDMAFS_MAX_CHAIN) {
		errno = EINVAL;
		return 0;
	}
	memset(wr, 0, n * sizeof wr[0]);
	for (i = 0; i < n; i++) {
		wr[i].next = i + 1 < n ? &wr[i + 1] : NULL;
		wr[i].wr_id = s[i].wr_id;
		wr[i].opcode = s[i].opcode;
		wr[i].send_flags = s[i].flags;
		wr[i].num_sge = s[i].num_sge;
		wr[i].sg_list = s[i].num_sge ? s[i].sge : NULL;
		switch (s[i].opcode) {
		case IBV_WR_RDMA_WRITE:
		case IBV_WR_RDMA_READ:
			wr[i].wr.rdma.remote_addr = s[i].remote_addr;
			wr[i].wr.rdma.rkey = s[i].rkey;
			break;
		case IBV_WR_SEND_WITH_INV:
		case IBV_WR_LOCAL_INV:
			wr[i].invalidate_rkey = s[i].inv_rkey;
			break;
		case IBV_WR_BIND_MW:
			wr[i].bind_mw.mw = s[i].mw;
			wr[i].bind_mw.rkey = s[i].new_rkey;
			wr[i].bind_mw.bind_info.mr = s[i].bind_mr;
			wr[i].bind_mw.bind_info.addr = s[i].bind_addr;
			wr[i].bind_mw.bind_info.length = s[i].bind_length;
			wr[i].bind_mw.bind_info.mw_access_flags = s[i].bind_access;
			break;
		}
	}
	ret = ibv_post_send(qp, wr, &bad);
	posted = n;
	if (ret) {
		// A provider that names no bad work request posted none.
		posted = bad >= wr && bad < wr + n ? (int)(bad - wr) : 0;
		errno = ret;
	}
	// The kernel checks the next bind against the key the window has
	// in user space, which is the library user's to keep (libibverbs'
	// own ibv_bind_mw does the same).
	for (i = 0; i < posted; i++)
		if (s[i].opcode == IBV_WR_BIND_MW)
			s[i].mw->rkey = s[i].new_rkey;
	return posted;
}

int rdmafs_post_recv(struct ibv_qp *qp, struct rdmafs_recv *r)
{
	struct ibv_recv_wr wr, *bad = NULL;

	memset(&wr, 0, sizeof wr);
	wr.wr_id = r->wr_id;
	wr.num_sge = r->num_sge;
	wr.sg_list = r->num_sge ? r->sge : NULL;
	return ibv_post_recv(qp, &wr, &bad);
}

static void flatten(const struct ibv_wc *wc, struct rdmafs_wc *out)
{
	out->wr_id = wc->wr_id;
	out->status = wc->status;
	out->opcode = wc->opcode;
	out->vendor_err = wc->vendor_err;
	out->byte_len = wc->byte_len;
	out->inv_rkey = wc->invalidated_rkey;
	out->flags = wc->wc_flags;
}

int rdmafs_poll(struct ibv_cq *cq, int n, struct rdmafs_wc *out)
{
	struct ibv_wc wc[32];
	int i, got;

	if (n > 32)
		n = 32;
	got = ibv_poll_cq(cq, n, wc);
	for (i = 0; i < got; i++)
		flatten(&wc[i], &out[i]);
	return got;
}

int rdmafs_spin_poll(struct ibv_cq *cq, int n, struct rdmafs_wc *out, int spins)
{
	int got = 0;

	while (spins-- > 0) {
		got = rdmafs_poll(cq, n, out);
		if (got != 0)
			break;
	}
	return got;
}

// rdmafs_poll_arm polls; if the CQ is empty it arms it for an event and
// polls once more (a completion that came before the arm raises no
// event). *armed is 1 if it armed, -1 if arming failed (the return value
// is then -errno), else 0. One crossing from Go for what a Wait does
// before it sleeps.
int rdmafs_poll_arm(struct ibv_cq *cq, int n, struct rdmafs_wc *out, int *armed)
{
	int got, ret;

	*armed = 0;
	got = rdmafs_poll(cq, n, out);
	if (got != 0)
		return got;
	ret = ibv_req_notify_cq(cq, 0);
	if (ret) {
		*armed = -1;
		return ret > 0 ? -ret : ret;
	}
	*armed = 1;
	return rdmafs_poll(cq, n, out);
}

// rdmafs_get_cq_event takes one event from a non-blocking completion
// channel and acks it at once: 1, 0 if there is none, -errno on error.
int rdmafs_get_cq_event(struct ibv_comp_channel *ch)
{
	struct ibv_cq *cq;
	void *ctx;

	if (ibv_get_cq_event(ch, &cq, &ctx)) {
		if (errno == EAGAIN || errno == EWOULDBLOCK)
			return 0;
		return -errno;
	}
	ibv_ack_cq_events(cq, 1);
	return 1;
}

int rdmafs_get_cm_event(struct rdma_event_channel *ch, struct rdmafs_cm_event *out)
{
	struct rdma_cm_event *ev;
	const struct rdma_conn_param *p;

	if (rdma_get_cm_event(ch, &ev))
		return -errno;
	memset(out, 0, sizeof *out);
	out->event = ev->event;
	out->status = ev->status;
	out->id = ev->id;
	out->listen_id = ev->listen_id;
	p = &ev->param.conn;
	out->responder_resources = p->responder_resources;
	out->initiator_depth = p->initiator_depth;
	if (p->private_data && p->private_data_len) {
		out->private_data_len = p->private_data_len;
		memcpy(out->private_data, p->private_data, p->private_data_len);
	}
	rdma_ack_cm_event(ev);
	return 0;
}

int rdmafs_get_async_event(struct ibv_context *ctx, struct rdmafs_async_event *out)
{
	struct ibv_async_event ev;

	if (ibv_get_async_event(ctx, &ev))
		return -errno;
	memset(out, 0, sizeof *out);
	out->type = ev.event_type;
	switch (ev.event_type) {
	case IBV_EVENT_QP_FATAL:
	case IBV_EVENT_QP_REQ_ERR:
	case IBV_EVENT_QP_ACCESS_ERR:
	case IBV_EVENT_COMM_EST:
	case IBV_EVENT_SQ_DRAINED:
	case IBV_EVENT_PATH_MIG:
	case IBV_EVENT_PATH_MIG_ERR:
	case IBV_EVENT_QP_LAST_WQE_REACHED:
		out->qp_num = ev.element.qp->qp_num;
		break;
	case IBV_EVENT_CQ_ERR:
		out->cq = ev.element.cq;
		break;
	case IBV_EVENT_PORT_ACTIVE:
	case IBV_EVENT_PORT_ERR:
	case IBV_EVENT_LID_CHANGE:
	case IBV_EVENT_PKEY_CHANGE:
	case IBV_EVENT_SM_CHANGE:
	case IBV_EVENT_CLIENT_REREGISTER:
	case IBV_EVENT_GID_CHANGE:
		out->port = ev.element.port_num;
		break;
	default:
		break;
	}
	ibv_ack_async_event(&ev);
	return 0;
}

int rdmafs_set_addr(struct sockaddr_storage *ss, int family, const uint8_t *ip, uint16_t port)
{
	memset(ss, 0, sizeof *ss);
	if (family == AF_INET) {
		struct sockaddr_in *sin = (struct sockaddr_in *)ss;
		sin->sin_family = AF_INET;
		sin->sin_port = htons(port);
		memcpy(&sin->sin_addr, ip, 4);
		return 0;
	}
	if (family == AF_INET6) {
		struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)ss;
		sin6->sin6_family = AF_INET6;
		sin6->sin6_port = htons(port);
		memcpy(&sin6->sin6_addr, ip, 16);
		return 0;
	}
	return -EAFNOSUPPORT;
}

// rdmafs_get_addr decodes sa: the IP in ip16 (4 or 16 bytes used), the
// port; returns the IP's length, 0 if sa is no IP address.
int rdmafs_get_addr(const struct sockaddr *sa, uint8_t *ip16, uint16_t *port)
{
	if (!sa)
		return 0;
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *sin = (const struct sockaddr_in *)sa;
		memcpy(ip16, &sin->sin_addr, 4);
		*port = ntohs(sin->sin_port);
		return 4;
	}
	if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6 *)sa;
		memcpy(ip16, &sin6->sin6_addr, 16);
		*port = ntohs(sin6->sin6_port);
		return 16;
	}
	return 0;
}

int rdmafs_create_qp(struct rdma_cm_id *id, struct ibv_pd *pd, struct ibv_cq *cq,
		     uint32_t send_wr, uint32_t recv_wr, uint32_t send_sge, uint32_t recv_sge,
		     uint32_t inline_data, uint32_t *inline_out)
{
	struct ibv_qp_init_attr a;

	memset(&a, 0, sizeof a);
	a.send_cq = cq;
	a.recv_cq = cq;
	a.qp_type = IBV_QPT_RC;
	a.sq_sig_all = 0;
	a.cap.max_send_wr = send_wr;
	a.cap.max_recv_wr = recv_wr;
	a.cap.max_send_sge = send_sge;
	a.cap.max_recv_sge = recv_sge;
	a.cap.max_inline_data = inline_data;
	if (rdma_create_qp(id, pd, &a))
		return -errno;
	*inline_out = a.cap.max_inline_data;
	return 0;
}

/* conn_param fills the connection parameters that rdma_connect and
 * rdma_accept share: the private data and the RDMA Read depths. */
static void conn_param(struct rdma_conn_param *p, const void *pdata, uint8_t pdata_len,
		       uint8_t responder_resources, uint8_t initiator_depth, uint8_t rnr_retry)
{
	memset(p, 0, sizeof *p);
	p->private_data = pdata_len ? pdata : NULL;
	p->private_data_len = pdata_len;
	p->responder_resources = responder_resources;
	p->initiator_depth = initiator_depth;
	p->rnr_retry_count = rnr_retry;
}

int rdmafs_connect(struct rdma_cm_id *id, const void *pdata, uint8_t pdata_len,
		   uint8_t responder_resources, uint8_t initiator_depth, uint8_t retry, uint8_t rnr_retry)
{
	struct rdma_conn_param p;

	conn_param(&p, pdata, pdata_len, responder_resources, initiator_depth, rnr_retry);
	p.retry_count = retry;
	if (rdma_connect(id, &p))
		return -errno;
	return 0;
}

int rdmafs_accept(struct rdma_cm_id *id, const void *pdata, uint8_t pdata_len,
		  uint8_t responder_resources, uint8_t initiator_depth, uint8_t rnr_retry)
{
	struct rdma_conn_param p;

	conn_param(&p, pdata, pdata_len, responder_resources, initiator_depth, rnr_retry);
	if (rdma_accept(id, &p))
		return -errno;
	return 0;
}

const char *rdmafs_device_name(struct ibv_context *ctx)
{
	return ibv_get_device_name(ctx->device);
}
