//go:build enet

#include "enet_bench.h"

#include <enet/enet.h>
#include <enet/time.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#define EB_MAX_SAMPLES (4u << 20)
#define EB_CHANNEL 0
#define EB_FLAGS ENET_PACKET_FLAG_RELIABLE /* reliable, ordered on its channel */

static int64_t now_ns(void) {
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts); /* the clock Go's time.Now().UnixNano() reads */
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int64_t win_start, win_end; /* accessed with __atomic */

void eb_set_window(int64_t s, int64_t e) {
	__atomic_store_n(&win_start, s, __ATOMIC_SEQ_CST);
	__atomic_store_n(&win_end, e, __ATOMIC_SEQ_CST);
}

static int in_window(int64_t ts) {
	int64_t e = __atomic_load_n(&win_end, __ATOMIC_SEQ_CST);
	return e != 0 && ts >= __atomic_load_n(&win_start, __ATOMIC_SEQ_CST) && ts < e;
}

int eb_init(void) { return enet_initialize(); }

/* The 16-byte stamp of wire.go. */
static void put_stamp(uint8_t *p, int64_t ts, uint32_t client, uint32_t seq) {
	memcpy(p, &ts, 8);
	memcpy(p + 8, &client, 4);
	memcpy(p + 12, &seq, 4);
}

typedef struct {
	uint64_t recv_win, recv_all, order_err, sent_win;
	int32_t *lat;
	size_t lat_n;
} rec_t;

static void rec_recv(rec_t *r, const uint8_t *p, size_t n, uint32_t *last, int64_t at) {
	int64_t ts;
	uint32_t seq;
	if (n < 16) return;
	memcpy(&ts, p, 8);
	memcpy(&seq, p + 12, 4);
	if (seq == 0) return;
	if (seq != *last + 1) r->order_err++;
	*last = seq;
	r->recv_all++;
	if (!in_window(ts)) return;
	r->recv_win++;
	if (r->lat == NULL) r->lat = malloc(sizeof(int32_t) * EB_MAX_SAMPLES);
	if (r->lat != NULL && r->lat_n < EB_MAX_SAMPLES) {
		int64_t us = (at - ts) / 1000;
		if (us < 0) us = 0;
		if (us > INT32_MAX) us = INT32_MAX;
		r->lat[r->lat_n++] = (int32_t)us;
	}
}

static void rec_out(rec_t *r, eb_stats *o) {
	o->recv_win = r->recv_win;
	o->recv_all = r->recv_all;
	o->order_err = r->order_err;
	o->sent_win = r->sent_win;
	o->lat_us = r->lat;
	o->lat_n = r->lat_n;
}

/* ------------------------------------------------------------------------ */
/* Server: one host, one thread, the loop ENet's tutorial shows, plus a tick. */

typedef struct {
	uint32_t last_up, down_seq;
} speer_t;

static ENetHost *srv;
static volatile int srv_stop;
static rec_t srv_rec;
static int srv_state_size, srv_state_hz;
static uint64_t srv_connected;

int eb_server_open(int max_peers, int state_size, int state_hz, int sockbuf) {
	ENetAddress a;
	memset(&a, 0, sizeof a);
	enet_address_set_host_ip(&a, "127.0.0.1");
	a.port = 0;
	/* channels: 1; bandwidth 0/0: "ENet will assume unlimited bandwidth". */
	srv = enet_host_create(&a, (size_t)max_peers, 1, 0, 0);
	if (srv == NULL) return -1;
	if (sockbuf > 0) {
		enet_socket_set_option(srv->socket, ENET_SOCKOPT_RCVBUF, sockbuf);
		enet_socket_set_option(srv->socket, ENET_SOCKOPT_SNDBUF, sockbuf);
	}
	srv_state_size = state_size;
	srv_state_hz = state_hz;
	ENetAddress bound;
	if (enet_socket_get_address(srv->socket, &bound) != 0) return -1;
	return bound.port;
}

static void srv_event(ENetEvent *ev, int64_t at) {
	switch (ev->type) {
	case ENET_EVENT_TYPE_CONNECT:
		ev->peer->data = calloc(1, sizeof(speer_t));
		srv_connected++;
		break;
	case ENET_EVENT_TYPE_RECEIVE: {
		speer_t *ps = ev->peer->data;
		if (ps != NULL) rec_recv(&srv_rec, ev->packet->data, ev->packet->dataLength, &ps->last_up, at);
		enet_packet_destroy(ev->packet);
		break;
	}
	case ENET_EVENT_TYPE_DISCONNECT:
		free(ev->peer->data);
		ev->peer->data = NULL;
		srv_connected--;
		break;
	default:
		break;
	}
}

void eb_server_run(void) {
	int64_t period = 1000000000LL / srv_state_hz;
	int64_t next_tick = now_ns() + period;
	uint8_t *buf = calloc(1, (size_t)srv_state_size);
	while (!srv_stop) {
		int64_t now = now_ns();
		if (now >= next_tick) {
			for (size_t i = 0; i < srv->peerCount; i++) {
				ENetPeer *p = &srv->peers[i];
				speer_t *ps = p->data;
				if (p->state != ENET_PEER_STATE_CONNECTED || ps == NULL) continue;
				int64_t ts = now_ns();
				put_stamp(buf, ts, (uint32_t)i, ++ps->down_seq);
				ENetPacket *pk = enet_packet_create(buf, (size_t)srv_state_size, EB_FLAGS);
				if (enet_peer_send(p, EB_CHANNEL, pk) == 0) {
					if (in_window(ts)) srv_rec.sent_win++;
				} else {
					enet_packet_destroy(pk);
				}
			}
			enet_host_flush(srv); /* the tick's state goes out now */
			next_tick += period;
			if (next_tick <= now) next_tick = now + period;
		}
		int64_t left = next_tick - now_ns();
		enet_uint32 wait = left > 1000000 ? 1 : 0; /* ms: wake for the next tick */
		ENetEvent ev;
		int r = enet_host_service(srv, &ev, wait);
		while (r > 0) {
			srv_event(&ev, now_ns());
			r = enet_host_service(srv, &ev, 0);
		}
	}
	free(buf);
}

void eb_server_stop(void) { srv_stop = 1; }

/* Live counters for the drain (read while the loop runs: monotonic 64-bit
 * counters, a stale value only makes the driver poll again). */
void eb_server_counts(uint64_t *recv_win, uint64_t *sent_win) {
	*recv_win = __atomic_load_n(&srv_rec.recv_win, __ATOMIC_RELAXED);
	*sent_win = __atomic_load_n(&srv_rec.sent_win, __ATOMIC_RELAXED);
}

void eb_server_stats(eb_stats *out) {
	memset(out, 0, sizeof *out);
	rec_out(&srv_rec, out);
	out->connected = srv_connected;
}

/* ------------------------------------------------------------------------ */
/* Clients: one host (socket) and one peer each, driven by EB_CLIENT_THREADS
 * C threads, each owning every k-th client: epoll tells which sockets have
 * datagrams, inputs go out at their time, and a host whose peer has a
 * reliable command past its retransmission timeout is serviced at once
 * (enet_host_flush does not retransmit: only enet_host_service checks
 * timeouts). ENet hosts are independent, so hosts on different threads need
 * no locking. */

#define EB_CLIENT_THREADS 2

typedef struct {
	ENetHost *h;
	ENetPeer *p;
	int connected;
	uint32_t up_seq, last_down;
	int64_t next_input;
} cli_t;

typedef struct {
	int epfd;
	rec_t rec;
	uint64_t snap[2][4];
	int snapped[2];
} worker_t;

static cli_t *clis;
static int ncli, cli_input_size, cli_input_hz;
static volatile int cli_stop;
static uint64_t cli_connected;
static worker_t workers[EB_CLIENT_THREADS];

int eb_client_threads(void) { return EB_CLIENT_THREADS; }

int eb_clients_open(int n, int port, int input_size, int input_hz) {
	ENetAddress local, remote;
	memset(&local, 0, sizeof local);
	memset(&remote, 0, sizeof remote);
	enet_address_set_host_ip(&local, "127.0.0.1");
	enet_address_set_host_ip(&remote, "127.0.0.1");
	remote.port = (enet_uint16)port;
	/* a fresh client set: reset what a previous one left */
	cli_stop = 0;
	eb_set_window(0, 0);
	__atomic_store_n(&cli_connected, 0, __ATOMIC_SEQ_CST);
	for (int w = 0; w < EB_CLIENT_THREADS; w++) {
		free(workers[w].rec.lat);
		memset(&workers[w], 0, sizeof workers[w]);
		workers[w].epfd = epoll_create1(0);
		if (workers[w].epfd < 0) return -1;
	}
	clis = calloc((size_t)n, sizeof(cli_t));
	if (clis == NULL) return -1;
	ncli = n;
	cli_input_size = input_size;
	cli_input_hz = input_hz;
	for (int i = 0; i < n; i++) {
		cli_t *c = &clis[i];
		c->h = enet_host_create(&local, 1, 1, 0, 0);
		if (c->h == NULL) return -1;
		enet_socket_set_option(c->h->socket, ENET_SOCKOPT_RCVBUF, 1 << 20);
		c->p = enet_host_connect(c->h, &remote, 1, 0);
		if (c->p == NULL) return -1;
		struct epoll_event ee;
		memset(&ee, 0, sizeof ee);
		ee.events = EPOLLIN;
		ee.data.u32 = (uint32_t)i;
		if (epoll_ctl(workers[i % EB_CLIENT_THREADS].epfd, EPOLL_CTL_ADD, c->h->socket, &ee) != 0) return -1;
		enet_host_flush(c->h); /* the connect command goes out now */
	}
	return 0;
}

static void cli_service(worker_t *w, cli_t *c, int idx) {
	ENetEvent ev;
	int r = enet_host_service(c->h, &ev, 0);
	while (r > 0) {
		int64_t at = now_ns();
		switch (ev.type) {
		case ENET_EVENT_TYPE_CONNECT: {
			c->connected = 1;
			__atomic_add_fetch(&cli_connected, 1, __ATOMIC_SEQ_CST);
			/* phases spread evenly over one input period */
			int64_t period = 1000000000LL / cli_input_hz;
			c->next_input = at + period * idx / ncli;
			break;
		}
		case ENET_EVENT_TYPE_RECEIVE:
			rec_recv(&w->rec, ev.packet->data, ev.packet->dataLength, &c->last_down, at);
			enet_packet_destroy(ev.packet);
			break;
		case ENET_EVENT_TYPE_DISCONNECT:
			if (c->connected) __atomic_sub_fetch(&cli_connected, 1, __ATOMIC_SEQ_CST);
			c->connected = 0;
			break;
		default:
			break;
		}
		r = enet_host_service(c->h, &ev, 0);
	}
}

static void cli_snapshot(worker_t *w, int self, int k) {
	uint64_t t[4] = {0, 0, 0, 0};
	for (int i = self; i < ncli; i += EB_CLIENT_THREADS) {
		ENetHost *h = clis[i].h;
		t[0] += h->totalSentData;
		t[1] += h->totalSentPackets;
		t[2] += h->totalReceivedData;
		t[3] += h->totalReceivedPackets;
	}
	memcpy(w->snap[k], t, sizeof t);
	w->snapped[k] = 1;
}

void eb_clients_run(int self) {
	worker_t *w = &workers[self];
	int64_t period = 1000000000LL / cli_input_hz;
	uint8_t *buf = calloc(1, (size_t)cli_input_size);
	struct epoll_event evs[256];
	while (!cli_stop) {
		int64_t now = now_ns();
		int64_t ws = __atomic_load_n(&win_start, __ATOMIC_SEQ_CST), we = __atomic_load_n(&win_end, __ATOMIC_SEQ_CST);
		if (we != 0 && !w->snapped[0] && now >= ws) cli_snapshot(w, self, 0);
		if (we != 0 && !w->snapped[1] && now >= we) cli_snapshot(w, self, 1);
		enet_uint32 ms = enet_time_get();
		for (int i = self; i < ncli; i += EB_CLIENT_THREADS) {
			cli_t *c = &clis[i];
			if (c->connected && now >= c->next_input) {
				int64_t ts = now_ns();
				put_stamp(buf, ts, (uint32_t)i, ++c->up_seq);
				ENetPacket *pk = enet_packet_create(buf, (size_t)cli_input_size, EB_FLAGS);
				if (enet_peer_send(c->p, EB_CHANNEL, pk) == 0) {
					if (in_window(ts)) __atomic_add_fetch(&w->rec.sent_win, 1, __ATOMIC_RELAXED);
				} else {
					enet_packet_destroy(pk);
				}
				enet_host_flush(c->h); /* send now, with any pending acks */
				c->next_input += period;
				if (c->next_input <= now) c->next_input = now + period;
			} else if (!enet_list_empty(&c->p->sentReliableCommands) &&
			           ENET_TIME_GREATER_EQUAL(ms, c->p->nextTimeout)) {
				cli_service(w, c, i); /* retransmission due */
			}
		}
		int n = epoll_wait(w->epfd, evs, 256, 1);
		for (int k = 0; k < n; k++) {
			int i = (int)evs[k].data.u32;
			cli_service(w, &clis[i], i);
		}
	}
	free(buf);
}

void eb_clients_stop(void) {
	cli_stop = 1;
}

void eb_clients_debug(void) {
	if (getenv("EB_DEBUG") == NULL) return;
	for (int i = 0; i < ncli && i < 5; i++) {
		ENetPeer *p = clis[i].p;
		fprintf(stderr, "enet client %d: rtt %u var %u lost %u throttle %u window %u intransit %u\n", i, p->roundTripTime,
		        p->roundTripTimeVariance, p->packetsLost, p->packetThrottle, p->windowSize, p->reliableDataInTransit);
	}
}

void eb_clients_counts(uint64_t *recv_win, uint64_t *sent_win) {
	uint64_t r = 0, s = 0;
	for (int w = 0; w < EB_CLIENT_THREADS; w++) {
		r += __atomic_load_n(&workers[w].rec.recv_win, __ATOMIC_RELAXED);
		s += __atomic_load_n(&workers[w].rec.sent_win, __ATOMIC_RELAXED);
	}
	*recv_win = r;
	*sent_win = s;
}

uint64_t eb_clients_connected(void) { return __atomic_load_n(&cli_connected, __ATOMIC_SEQ_CST); }

/* After every worker stopped: the workers' results merged (the latency
 * samples copied into one array the caller frees with free). */
void eb_clients_stats(eb_stats *out) {
	memset(out, 0, sizeof *out);
	size_t total = 0;
	for (int w = 0; w < EB_CLIENT_THREADS; w++) total += workers[w].rec.lat_n;
	out->lat_us = total > 0 ? malloc(sizeof(int32_t) * total) : NULL;
	int whole = 1;
	for (int w = 0; w < EB_CLIENT_THREADS; w++) {
		rec_t *r = &workers[w].rec;
		out->recv_win += r->recv_win;
		out->recv_all += r->recv_all;
		out->order_err += r->order_err;
		out->sent_win += r->sent_win;
		if (out->lat_us != NULL && r->lat_n > 0) {
			memcpy(out->lat_us + out->lat_n, r->lat, sizeof(int32_t) * r->lat_n);
			out->lat_n += r->lat_n;
		}
		whole = whole && workers[w].snapped[0] && workers[w].snapped[1];
	}
	if (whole)
		for (int w = 0; w < EB_CLIENT_THREADS; w++)
			for (int k = 0; k < 4; k++) out->traffic[k] += workers[w].snap[1][k] - workers[w].snap[0][k];
	out->connected = eb_clients_connected();
}

void eb_clients_close(void) {
	for (int i = 0; i < ncli; i++) {
		if (clis[i].h == NULL) continue;
		if (clis[i].p != NULL) enet_peer_disconnect_now(clis[i].p, 0);
		enet_host_destroy(clis[i].h);
	}
	free(clis);
	clis = NULL;
	ncli = 0;
	for (int w = 0; w < EB_CLIENT_THREADS; w++) {
		if (workers[w].epfd >= 0) close(workers[w].epfd);
		workers[w].epfd = -1;
	}
}
