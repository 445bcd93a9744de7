//go:build enet

// The ENet side of bench/peers, in C so that ENet's hot path runs as a C
// game server's would, with Go only starting it and reading the results.
// One server and one client set per process at a time.
#ifndef ENET_BENCH_H
#define ENET_BENCH_H

#include <stdint.h>
#include <stddef.h>

typedef struct {
	uint64_t recv_win;   // messages received that were stamped inside the window
	uint64_t recv_all;   // every message received
	uint64_t order_err;  // sequence not last+1
	uint64_t sent_win;   // messages this end sent inside the window
	int32_t *lat_us;     // latency samples (µs) of recv_win, up to lat_cap
	size_t   lat_n;
	uint64_t traffic[4]; // client sets: up bytes, up datagrams, down bytes, down datagrams inside the window
	uint64_t connected;
} eb_stats;

int  eb_init(void);
void eb_set_window(int64_t start_ns, int64_t end_ns);

// Server: bind 127.0.0.1:0 with room for max_peers; returns the port or -1.
int  eb_server_open(int max_peers, int state_size, int state_hz, int sockbuf);
void eb_server_run(void);   // until eb_server_stop; call on its own thread
void eb_server_stop(void);
void eb_server_stats(eb_stats *out);
void eb_server_counts(uint64_t *recv_win, uint64_t *sent_win);

// Clients: n hosts, one socket and one peer each, connecting to port on
// 127.0.0.1 (or the relay). Returns 0 or -1. eb_clients_run(k) runs worker
// k of eb_client_threads(), each on its own thread, until eb_clients_stop.
int  eb_client_threads(void);
int  eb_clients_open(int n, int port, int input_size, int input_hz);
void eb_clients_run(int self);
void eb_clients_debug(void);
void eb_clients_stop(void);
uint64_t eb_clients_connected(void);
void eb_clients_stats(eb_stats *out); // lat_us: the caller frees it
void eb_clients_counts(uint64_t *recv_win, uint64_t *sent_win);
void eb_clients_close(void);

#endif
