// C helpers of the ibverbs provider: the verbs that rdma-core 44 defines
// static inline (so cgo cannot call them), and flat structs that Go fills
// and reads instead of libibverbs' unions. Nothing here keeps a pointer
// given to it after it returns.

#ifndef RDMAFS_HELPERS_H
#define RDMAFS_HELPERS_H

#include <stdint.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

// Scatter/gather entries per work request the helpers take; the provider
// refuses more (and devices rarely allow more).
#define RDMAFS_MAX_SGE 32

// Send work requests posted in one call at most (verbs.MaxChain).
#define RDMAFS_MAX_CHAIN 8

// A send work request, flat. Go fills an array of these in C memory and
// rdmafs_post_send builds the linked ibv_send_wrs on its stack.
struct rdmafs_send {
	uint64_t wr_id;
	uint32_t opcode;      // IBV_WR_*
	uint32_t flags;       // IBV_SEND_*
	uint64_t remote_addr; // RDMA WRITE/READ
	uint32_t rkey;        // RDMA WRITE/READ
	uint32_t inv_rkey;    // SEND_WITH_INV, LOCAL_INV
	struct ibv_mw *mw;    // BIND_MW
	struct ibv_mr *bind_mr;
	uint64_t bind_addr;
	uint64_t bind_length;
	uint32_t bind_access;
	uint32_t new_rkey;
	int num_sge;
	struct ibv_sge sge[RDMAFS_MAX_SGE];
};

struct rdmafs_recv {
	uint64_t wr_id;
	int num_sge;
	struct ibv_sge sge[RDMAFS_MAX_SGE];
};

// A work completion, flat.
struct rdmafs_wc {
	uint64_t wr_id;
	uint32_t status;
	uint32_t opcode;
	uint32_t vendor_err;
	uint32_t byte_len;
	uint32_t inv_rkey; // the invalidated rkey (or immediate data): see flags
	uint32_t flags;
};

// A connection manager event, copied out so that it can be acked at once.
struct rdmafs_cm_event {
	int event;
	int status;
	struct rdma_cm_id *id;
	struct rdma_cm_id *listen_id;
	uint8_t responder_resources;
	uint8_t initiator_depth;
	uint8_t private_data_len;
	uint8_t private_data[256];
};

// An asynchronous event of a device, copied out and acked.
struct rdmafs_async_event {
	int type;
	uint32_t qp_num; // QP events
	struct ibv_cq *cq; // CQ events
	int port;        // port events
};

int rdmafs_query_port(struct ibv_context *ctx, uint8_t port, struct ibv_port_attr *attr);
struct ibv_mw *rdmafs_alloc_mw(struct ibv_pd *pd);
int rdmafs_dealloc_mw(struct ibv_mw *mw);
int rdmafs_post_send(struct ibv_qp *qp, struct rdmafs_send *s, int n);
int rdmafs_post_recv(struct ibv_qp *qp, struct rdmafs_recv *r);
int rdmafs_poll(struct ibv_cq *cq, int n, struct rdmafs_wc *out);
int rdmafs_spin_poll(struct ibv_cq *cq, int n, struct rdmafs_wc *out, int spins);
int rdmafs_poll_arm(struct ibv_cq *cq, int n, struct rdmafs_wc *out, int *armed);
int rdmafs_get_cq_event(struct ibv_comp_channel *ch);
int rdmafs_get_cm_event(struct rdma_event_channel *ch, struct rdmafs_cm_event *out);
int rdmafs_get_async_event(struct ibv_context *ctx, struct rdmafs_async_event *out);
int rdmafs_set_addr(struct sockaddr_storage *ss, int family, const uint8_t *ip, uint16_t port);
int rdmafs_get_addr(const struct sockaddr *sa, uint8_t *ip16, uint16_t *port);
int rdmafs_create_qp(struct rdma_cm_id *id, struct ibv_pd *pd, struct ibv_cq *cq,
		     uint32_t send_wr, uint32_t recv_wr, uint32_t send_sge, uint32_t recv_sge,
		     uint32_t inline_data, uint32_t *inline_out);
int rdmafs_connect(struct rdma_cm_id *id, const void *pdata, uint8_t pdata_len,
		   uint8_t responder_resources, uint8_t initiator_depth, uint8_t retry, uint8_t rnr_retry);
int rdmafs_accept(struct rdma_cm_id *id, const void *pdata, uint8_t pdata_len,
		  uint8_t responder_resources, uint8_t initiator_depth, uint8_t rnr_retry);
const char *rdmafs_device_name(struct ibv_context *ctx);

#endif
