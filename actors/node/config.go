package node

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ghostwire/ghostwire/actors/cluster"
	"github.com/ghostwire/ghostwire/zones/sim"
	"github.com/ghostwire/ghostwire/zones/world"
)

// Config is everything one zoned process needs. The zero value is not
// usable; start from DefaultConfig. Precedence, applied by cmd/zoned: flags
// over environment (GHOSTWIRE_*) over the config file over defaults.
type Config struct {
	// UDPAddr is where the gateway listens for clients.
	UDPAddr string `json:"udp"`
	// PublicAddr is the gateway address connect tokens name (what clients
	// dial). Empty: the UDP address, with a wildcard host taken as
	// 127.0.0.1 — right for one machine, wrong behind NAT or in Kubernetes.
	PublicAddr string `json:"public_addr"`
	// HTTPAddr serves /healthz, /readyz, /metrics and the world map (/map).
	// Empty disables HTTP. The default binds loopback only; a pod or a
	// container passes a reachable address (--http :8080).
	HTTPAddr string `json:"http"`
	// DataDir holds the embedded NATS store and the dev token key.
	DataDir string `json:"data"`
	// WorldFile is the world map; empty means the built-in default world.
	WorldFile string `json:"world"`
	// Tick is the zone simulation period.
	Tick Duration `json:"tick"`
	// NPCs is the number of wandering NPCs spread over the world.
	NPCs int `json:"npcs"`
	// FarEvery is how often, in ticks, a player's far view members (beyond
	// half the interest radius) get a fresh state: 1 every tick, 2 (the
	// default) every 2nd tick. See sim.Config.FarEvery.
	FarEvery int `json:"far_every"`
	// NATSURL points at an external NATS cluster; empty embeds a server.
	NATSURL string `json:"nats"`
	// NATSCreds is a credentials file for an external NATS (--nats): a
	// user/password file (the node.creds a dev zoned writes into its data
	// dir) or a NATS .creds file. Empty: connect without credentials.
	// The embedded server always wants credentials: it writes and uses
	// DataDir/node.creds and DataDir/admin.creds.
	NATSCreds string `json:"nats_creds"`
	// NATSListen is the embedded server's client address (port 0: random).
	NATSListen string `json:"nats_listen"`
	// NodeID names this node in the cluster directory and in NATS subjects
	// ([A-Za-z0-9_-], at most 64). Empty: hostname-udpport.
	NodeID string `json:"node_id"`
	// Zones lists the zones this node claims (comma-separated ids), or
	// "auto": unowned zones up to a fair share of the live nodes.
	Zones string `json:"zones"`
	// LeaseTTL is how long a zone lease lives without renewal (renewed
	// every sixth of it): how soon survivors may claim a dead node's zones.
	LeaseTTL Duration `json:"lease_ttl"`
	// KVReplicas is how many servers of a NATS cluster keep each of
	// zoned's KV buckets (leases, player records, node records): 1 (the
	// default) for the embedded server; 3 for a three-server cluster, so
	// losing one server loses no lease or record. The buckets are created
	// by the first node; a later node with another value updates them.
	KVReplicas int `json:"kv_replicas"`
	// KeyFile is the connect-token key. Empty: DataDir/token.key, generated
	// on first start (the single-machine default). In production point it
	// at a mounted secret, or set GHOSTWIRE_TOKEN_KEY.
	KeyFile string `json:"key_file"`
	// MaxConns caps connected clients; beyond it the gateway refuses with
	// reason "server full".
	MaxConns int `json:"max_conns"`
	// ShutdownTimeout bounds graceful shutdown.
	ShutdownTimeout Duration `json:"shutdown_timeout"`
	// DevGame turns on the dev world's event logic: ordered events on lane 0
	// are echoed to their sender (botswarm checks them) and lane 1 teleports
	// the sender. Off, client events are counted and dropped; a production
	// game plugs its own zone.EventHandler in instead.
	DevGame bool `json:"dev_game"`
	// Pprof serves net/http/pprof under /debug/pprof/ on the HTTP address.
	// Off by default: profiles reveal internals and cost CPU while taken.
	Pprof bool `json:"pprof"`

	// Collectors are the embedding process's own metrics (zoned's
	// GOMAXPROCS sizer), registered on the node's registry before the node
	// reports ready, so the first scrape after "zoned ready" has them.
	// Not a setting: never read from a file or the environment.
	Collectors []prometheus.Collector `json:"-"`

	// spawn places joining players (tests); nil: the zones' default.
	spawn func(player uint64, r world.Rect) [3]float32
	// expiryLook is how many heartbeats go between two looks at the zones
	// bucket's expiry (tests); 0: expiryLookEvery.
	expiryLook int
	// npcGeneration gives each zone run its NPC generation (cluster mode:
	// from the zone's lease epoch); nil: 0.
	npcGeneration func(zone string) uint64
	// acting says whether this node may still run a zone (cluster mode:
	// its lease renewed in time, zone.Params.Acting); nil: always.
	acting func(zone string) bool
	// clockOffset shifts the node clock (tests: nodes of one process whose
	// clocks read as differently as separately started processes').
	clockOffset time.Duration
	// keyReload is how often the key file is read again (zero:
	// keyReloadEvery; tests shorten it).
	keyReload time.Duration
}

// DefaultConfig is a whole world on one machine.
func DefaultConfig() Config {
	return Config{
		UDPAddr:         ":7777",
		HTTPAddr:        "127.0.0.1:8080", // loopback: the map shows every player; expose it on purpose
		DataDir:         "ghostwire-data",
		Tick:            Duration(50 * time.Millisecond),
		NPCs:            200,
		FarEvery:        sim.DefaultFarEvery,
		NATSListen:      "127.0.0.1:4222",
		Zones:           "auto",
		LeaseTTL:        Duration(3 * time.Second),
		KVReplicas:      1,
		MaxConns:        10000,
		ShutdownTimeout: Duration(5 * time.Second),
		DevGame:         true,
	}
}

// KeyPath is the token key file this config uses.
func (c Config) KeyPath() string {
	if c.KeyFile != "" {
		return c.KeyFile
	}
	return filepath.Join(c.DataDir, "token.key")
}

// Validate reports the first problem with c in words an operator can act on.
func (c Config) Validate() error {
	var errs []error
	if _, err := parseListenAddr(c.UDPAddr); err != nil {
		errs = append(errs, fmt.Errorf("udp address %q: %w", c.UDPAddr, err))
	}
	if c.PublicAddr != "" {
		if ap, err := ParsePublicAddr(c.PublicAddr); err != nil || ap.Addr().IsUnspecified() || ap.Port() == 0 {
			errs = append(errs, fmt.Errorf("public address %q: want a concrete host:port that clients can dial", c.PublicAddr))
		}
	}
	if c.HTTPAddr != "" {
		if _, err := parseListenAddr(c.HTTPAddr); err != nil {
			errs = append(errs, fmt.Errorf("http address %q: %w", c.HTTPAddr, err))
		}
	}
	if c.DataDir == "" {
		errs = append(errs, errors.New("data dir must not be empty"))
	}
	if t := c.Tick.D(); t < time.Millisecond || t > time.Second {
		errs = append(errs, fmt.Errorf("tick %v: must be between 1ms and 1s", t))
	}
	if c.NPCs < 0 || c.NPCs > 1_000_000 {
		errs = append(errs, fmt.Errorf("npcs %d: must be between 0 and 1000000", c.NPCs))
	}
	if c.FarEvery < 1 || c.FarEvery > sim.MaxFarEvery {
		errs = append(errs, fmt.Errorf("far every %d: must be between 1 (every tick) and %d ticks", c.FarEvery, sim.MaxFarEvery))
	}
	if c.MaxConns < 1 {
		errs = append(errs, fmt.Errorf("max conns %d: must be at least 1", c.MaxConns))
	}
	if c.NodeID != "" && !cluster.ValidID(c.NodeID) {
		errs = append(errs, fmt.Errorf("node id %q: want 1-64 characters from [A-Za-z0-9_-]", c.NodeID))
	}
	if _, err := c.zoneList(); err != nil {
		errs = append(errs, err)
	}
	if t := c.LeaseTTL.D(); t < 300*time.Millisecond || t > 5*time.Minute {
		errs = append(errs, fmt.Errorf("lease ttl %v: must be between 300ms and 5m", t))
	}
	if c.KVReplicas < 1 || c.KVReplicas > 5 {
		errs = append(errs, fmt.Errorf("kv replicas %d: must be 1-5 (JetStream's limit)", c.KVReplicas))
	}
	if c.ShutdownTimeout.D() <= 0 {
		errs = append(errs, fmt.Errorf("shutdown timeout %v: must be positive", c.ShutdownTimeout.D()))
	}
	return errors.Join(errs...)
}

// zoneList returns the zones named by Zones, or nil for "auto".
func (c Config) zoneList() ([]string, error) {
	if c.Zones == "" || c.Zones == "auto" {
		return nil, nil
	}
	var ids []string
	for _, id := range strings.Split(c.Zones, ",") {
		id = strings.TrimSpace(id)
		if !cluster.ValidID(id) {
			return nil, fmt.Errorf("zones %q: %q is not a zone id (want auto, or ids from [A-Za-z0-9_-] separated by commas)", c.Zones, id)
		}
		if slices.Contains(ids, id) {
			return nil, fmt.Errorf("zones %q: %q listed twice", c.Zones, id)
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// ParsePublicAddr parses a public address: host:port, [v6]:port, or an
// IPv6 address and port joined by a colon without brackets (fd00::1:7777,
// what "$(POD_IP):7777" gives in a Kubernetes manifest on an IPv6 pod: the
// port is what follows the last colon).
func ParsePublicAddr(s string) (netip.AddrPort, error) {
	ap, err := netip.ParseAddrPort(s)
	if err == nil {
		return ap, nil
	}
	i := strings.LastIndexByte(s, ':')
	if i < 0 || strings.ContainsAny(s, "[]") || strings.Count(s, ":") < 3 {
		return netip.AddrPort{}, err
	}
	addr, aerr := netip.ParseAddr(s[:i])
	port, perr := strconv.ParseUint(s[i+1:], 10, 16)
	if aerr != nil || perr != nil || !addr.Is6() {
		return netip.AddrPort{}, err
	}
	return netip.AddrPortFrom(addr, uint16(port)), nil
}

// parseListenAddr accepts "host:port" and ":port".
func parseListenAddr(s string) (netip.AddrPort, error) {
	if len(s) > 0 && s[0] == ':' {
		p, err := strconv.ParseUint(s[1:], 10, 16)
		if err != nil {
			return netip.AddrPort{}, errors.New("bad port")
		}
		return netip.AddrPortFrom(netip.IPv6Unspecified(), uint16(p)), nil
	}
	ap, err := netip.ParseAddrPort(s)
	if err != nil {
		return netip.AddrPort{}, errors.New("want host:port or :port with a numeric host")
	}
	return ap, nil
}

// LoadFile overlays the JSON config file at path onto c. Unknown keys are an
// error, so a typo does not silently fall back to a default.
func (c *Config) LoadFile(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("config file: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(c); err != nil {
		return fmt.Errorf("config file %s: %w", path, err)
	}
	return nil
}

// Duration is a time.Duration that reads and writes as "50ms" in JSON.
type Duration time.Duration

// D is d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// MarshalJSON implements json.Marshaler.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON implements json.Unmarshaler.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration: want a string like \"50ms\": %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}
