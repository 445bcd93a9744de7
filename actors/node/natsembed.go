package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ghostwire/ghostwire/actors/admin/adminclient"
	"github.com/ghostwire/ghostwire/actors/cluster"
)

// Key-value buckets of the world directory (DESIGN §5, docs/cluster.md):
// zone leases (actors/cluster.Leases), node records (directory.go) and
// player records (created, not written yet: the resilience work).
const (
	BucketZones   = "ghostwire_zones"
	BucketPlayers = "ghostwire_players"
	BucketNodes   = "ghostwire_nodes"
)

// natsLink is this node's NATS: an embedded server (default) or a connection
// to an external cluster.
type natsLink struct {
	srv *natsserver.Server // nil when external
	nc  *nats.Conn
	js  jetstream.JetStream
	kv  map[string]jetstream.KeyValue
	url string
	// zonesCfg is the zones bucket's configuration as this node set it
	// (keepZonesExpiry puts its expiry back); expiryRestored counts how
	// often another node had shortened it.
	zonesCfg       jetstream.KeyValueConfig
	expiryRestored atomic.Uint64

	// What the connection went through: slow-consumer drops (a
	// subscription's pending limit hit: messages lost), disconnects and
	// reconnects. Counted and logged, never silent.
	slow, disconnects, reconnects atomic.Uint64
	// onReconnect runs after each reconnect (set once the leases exist):
	// leases close to their expiry are renewed at once.
	onReconnect atomic.Pointer[func()]
	// unlock releases the data dir (lockDataDir) after the embedded
	// server stopped; nil when external.
	unlock func()
}

// startNATS starts the embedded server (or connects to cfg.NATSURL) and
// opens the buckets; zones is the world map's zone count (the zones
// bucket's keys).
func startNATS(ctx context.Context, cfg Config, zones int, log *slog.Logger) (*natsLink, error) {
	l := &natsLink{kv: make(map[string]jetstream.KeyValue, 3)}
	url := cfg.NATSURL
	var auth []nats.Option
	if cfg.NATSCreds != "" {
		o, err := adminclient.CredsOption(cfg.NATSCreds)
		if err != nil {
			return nil, fmt.Errorf("--nats-creds: %w", err)
		}
		auth = append(auth, o)
	}
	if url == "" {
		host, portStr, err := net.SplitHostPort(cfg.NATSListen)
		if err != nil {
			return nil, fmt.Errorf("--nats-listen %q: %w", cfg.NATSListen, err)
		}
		port, err := strconv.Atoi(portStr)
		if err != nil || port < -1 || port > 65535 {
			return nil, fmt.Errorf("--nats-listen %q: bad port", cfg.NATSListen)
		}
		if l.unlock, err = lockDataDir(cfg.DataDir); errors.Is(err, errLockUnsupported) {
			log.Warn("embedded NATS store not locked", "err", err)
		} else if err != nil {
			return nil, err
		}
		fail := func(err error) (*natsLink, error) {
			l.close()
			return nil, err
		}
		if port == 0 {
			port = natsserver.RANDOM_PORT
		} else if ln, err := net.Listen("tcp", net.JoinHostPort(host, portStr)); err != nil {
			// nats-server would only fail to become ready (10 s); say why
			// now. (Another process may still take the port before the
			// server binds it: the readiness wait below catches that.)
			return fail(fmt.Errorf("--nats-listen %q: the embedded NATS cannot listen there (another zoned on this machine? give each its own --nats-listen, or port 0): %w", cfg.NATSListen, err))
		} else {
			ln.Close()
		}
		admin, node, err := devCreds(cfg.DataDir, cfg.NATSListen)
		if err != nil {
			return fail(fmt.Errorf("embedded NATS credentials: %w", err))
		}
		opts := &natsserver.Options{
			Users:      authUsers(admin, node),
			ServerName: "zoned-embedded",
			Host:       host,
			Port:       port,
			JetStream:  true,
			StoreDir:   filepath.Join(cfg.DataDir, "nats"),
			NoSigs:     true, // zoned owns signal handling
			NoLog:      true,
			// The embedded server serves this process and local tools;
			// bound its memory so a runaway publisher cannot take the node.
			JetStreamMaxMemory: 64 << 20,
			JetStreamMaxStore:  1 << 30,
			// No subject → subscribers cache in the account's (and the
			// node user's permission) sublists: every player's record has
			// its own subject ($KV.ghostwire_players.p.<id>), so at 1,000+
			// players the 1,024-entry caches hold player subjects that come
			// back once a second and churn past 1,024 (≈ 130 KB at 1,000
			// players, measured). A match without it walks a four-level
			// trie; each client's own 512-entry results cache stays.
			NoSublistCache: true,
		}
		srv, err := natsserver.NewServer(opts)
		if err != nil {
			return fail(fmt.Errorf("embedded nats-server: %w", err))
		}
		go srv.Start()
		if !srv.ReadyForConnections(10 * time.Second) {
			srv.Shutdown()
			return fail(errors.New("embedded nats-server: not ready within 10s (is the port in use? see --nats-listen)"))
		}
		l.srv = srv
		url = withUser(srv.ClientURL(), node)
		log.Info("embedded NATS with JetStream", "client_url", srv.ClientURL(), "store", opts.StoreDir,
			"admin_creds", filepath.Join(cfg.DataDir, AdminCredsFile), "node_creds", filepath.Join(cfg.DataDir, NodeCredsFile))
	}
	// Reconnect every 250 ms, not nats.go's 2 s: a lease fences itself
	// 2/3 TTL after its last renewal (2 s at the default 3 s TTL), so with
	// 2 s between attempts even a 1 s restart of NATS cost every zone
	// (cmd/chaos, make chaos-nats).
	nc, err := nats.Connect(url, append(auth, nats.Name("zoned"), nats.MaxReconnects(-1), nats.ReconnectWait(250*time.Millisecond),
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			subject := ""
			if sub != nil {
				subject = sub.Subject
			}
			if errors.Is(err, nats.ErrSlowConsumer) {
				if l.slow.Add(1) == 1 || l.slow.Load()%1000 == 0 {
					log.Warn("NATS slow consumer: messages dropped (cluster traffic lost)", "subject", subject, "total", l.slow.Load())
				}
				return
			}
			log.Warn("NATS error", "subject", subject, "err", err)
		}),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err == nil {
				return // our own Close or Drain at shutdown
			}
			l.disconnects.Add(1)
			log.Warn("NATS disconnected; reconnecting (local play continues)", "err", err)
		}),
		nats.ReconnectHandler(func(c *nats.Conn) {
			l.reconnects.Add(1)
			log.Info("NATS reconnected", "url", c.ConnectedUrlRedacted())
			if fn := l.onReconnect.Load(); fn != nil {
				(*fn)()
			}
		}))...)
	if err != nil {
		l.close()
		return nil, fmt.Errorf("connect to NATS at %s: %w", adminclient.Redact(url), err)
	}
	l.nc, l.url = nc, url
	js, err := jetstream.New(nc)
	if err != nil {
		l.close()
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	l.js = js
	// Zone leases expire LeaseTTL after their owner's last renewal, node
	// records three heartbeats after the last one; both leave a marker, so
	// watchers hear of it. Player records do not expire. The two small
	// buckets are bounded so their file blocks stay small (smallBucketBytes).
	zonesKV := cluster.LeaseBucketConfig(BucketZones, cfg.LeaseTTL.D())
	zonesKV.MaxBytes = zonesBucketBytes(zones)
	for _, kc := range []jetstream.KeyValueConfig{
		zonesKV,
		cluster.PlayersBucketConfig(BucketPlayers),
		{Bucket: BucketNodes, History: 1, Storage: jetstream.FileStorage, TTL: 3 * heartbeat, LimitMarkerTTL: 3 * heartbeat,
			MaxBytes: smallBucketBytes},
	} {
		kc.Replicas = max(cfg.KVReplicas, 1)
		kv, err := js.CreateOrUpdateKeyValue(ctx, kc)
		var apiErr *jetstream.APIError
		if kc.Replicas > 1 && errors.As(err, &apiErr) && apiErr.ErrorCode == jsErrReplicasNotSupported {
			// A single NATS server (a dev setup of the production
			// manifests): one copy is all it can keep.
			log.Warn("NATS is not clustered: KV buckets kept on its one server (--kv-replicas ignored)", "bucket", kc.Bucket, "kv_replicas", kc.Replicas)
			kc.Replicas = 1
			kv, err = js.CreateOrUpdateKeyValue(ctx, kc)
		}
		if err != nil {
			l.close()
			return nil, fmt.Errorf("jetstream kv %s: %w", kc.Bucket, err)
		}
		l.kv[kc.Bucket] = kv
		if kc.Bucket == BucketZones {
			l.zonesCfg = kc
		}
	}
	return l, nil
}

// keepZonesExpiry puts the zones bucket's expiry back when another node
// has shortened it. Every node sets the bucket's configuration at its
// start, and a zoned from before the leases were judged by the nodes (or
// one with a shorter --lease-ttl) sets the server's expiry to its TTL:
// the server then expires, at its first age check after a NATS election,
// leases held through the election (the race the backstop closed; the
// claims stay compare-and-sets, so it costs leases, not safety). A longer
// expiry than this node's is left as it is: a later backstop is as safe.
func (l *natsLink) keepZonesExpiry(ctx context.Context, log *slog.Logger) {
	kv := l.kv[BucketZones]
	if kv == nil || l.zonesCfg.TTL == 0 {
		return
	}
	st, err := kv.Status(ctx)
	if err != nil || st.TTL() >= l.zonesCfg.TTL {
		return // unreadable now (NATS away, an election): the next look
	}
	log.Warn("zones bucket's expiry shortened by another node (a zoned of an older version, or one with a shorter --lease-ttl); set back: run one zoned version and one --lease-ttl across a world",
		"bucket", BucketZones, "found", st.TTL(), "set", l.zonesCfg.TTL)
	if _, err := l.js.UpdateKeyValue(ctx, l.zonesCfg); err != nil {
		log.Warn("zones bucket's expiry not set back; tried again at the next look", "err", err)
		return
	}
	l.expiryRestored.Add(1)
}

func (l *natsLink) close() {
	if l.nc != nil {
		_ = l.nc.Drain()
		// Drain is asynchronous; Close after it bounds the wait.
		deadline := time.Now().Add(2 * time.Second)
		for l.nc.IsDraining() && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		l.nc.Close()
	}
	if l.srv != nil {
		l.srv.Shutdown()
		l.srv.WaitForShutdown()
	}
	if l.unlock != nil {
		l.unlock()
		l.unlock = nil
	}
}

// smallBucketBytes bounds the zones and nodes buckets (MaxBytes: what
// their live keys may take; History 1, so a key's newer value or marker
// replaces it) so that nats-server gives their streams 32 KB file blocks,
// not a KV's 4 MB. nats-server (v2.15, stream.go
// autoTuneFileStorageBlockSize) sizes a file stream's blocks from its
// limits: MaxBytes/4 + 1, rounded up to 100 B, is 32,000 B if at most
// that, else 4 MB (8 MB from 32 MB); a KV without MaxBytes gets 4 MB. A
// stream's last block keeps its write cache while writes come within 10 s
// of each other, in the server's pooled buffers (256 KB, 1 MB, 4 MB) as
// the block grows: a bucket written all the time holds 4 MB over the last
// three quarters of each block's life. The leases (8 writes of ≈ 150 B a
// second at 4 zones) reach that after ≈ 15 min and roll after ≈ 1 h, the
// node records (one of ≈ 130 B a node a second) after ≈ 2.3 h and 9 h;
// with 32 KB blocks each bucket keeps one 256 KB buffer. The server sizes
// the blocks whenever it opens the stream, a restart too, from the stored
// limits (TestSmallBucketsKeepSmallBlocks). A full bucket refuses writes
// (a KV discards new), so the bound leaves room: ≈ 250 keys of 512 B.
// zonesBucketBytes leaves a world of more zones unbounded; the nodes
// bucket holds ≈ 980 node records.
//
// The players bucket cannot be bounded so (its records stay, ≈ 260 B a
// player who ever played): its last block's cache is 0.5–4 MB while
// players are online (TestEmbeddedNATSPlayersFootprint, docs/operations.md).
const smallBucketBytes = 127_999

// smallBucketKeyBytes is what one key of a small bucket is allowed
// (a lease is ≈ 150 B stored: subject, headers, record; ×3 room).
const smallBucketKeyBytes = 512

// zonesBucketBytes is the zones bucket's MaxBytes for a world of zones:
// smallBucketBytes while its leases fit with room, else unbounded (4 MB
// blocks: a world of more than 249 zones).
func zonesBucketBytes(zones int) int64 {
	if zones*smallBucketKeyBytes <= smallBucketBytes {
		return smallBucketBytes
	}
	return 0
}

// jsErrReplicasNotSupported is JetStream's error code for a replicated
// stream asked of a server that is not clustered (nats.go has no name for
// it).
const jsErrReplicasNotSupported jetstream.ErrorCode = 10074
