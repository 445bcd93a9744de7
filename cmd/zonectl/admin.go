package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	"github.com/ghostwire/ghostwire/actors/admin/adminclient"
	pb "github.com/ghostwire/ghostwire/proto/ghostwire/v1"
	"google.golang.org/protobuf/proto"
)

// credsPath picks the credentials file: --creds, $GHOSTWIRE_CREDS, or the
// dev zoned's DATA/admin.creds when it exists ("" when none: NATS without
// auth).
func credsPath(e env, g *globals) string {
	if g.creds != "" {
		return g.creds
	}
	if p := e.getenv(adminclient.EnvCreds); p != "" {
		return p
	}
	p := filepath.Join(g.data, "admin.creds")
	if _, err := os.Stat(p); err == nil {
		return p
	}
	return ""
}

// caller names the operator in the nodes' audit log.
func caller(e env) string {
	name := e.getenv("USER")
	if name == "" {
		if u, err := user.Current(); err == nil {
			name = u.Username
		}
	}
	host, _ := os.Hostname()
	return cmp.Or(name, "unknown") + "@" + cmp.Or(host, "unknown")
}

func connect(ctx context.Context, e env, g *globals) (*adminclient.Client, error) {
	if g.timeout <= 0 {
		return nil, fmt.Errorf("%w: --timeout %s: want a positive duration", errUsage, g.timeout)
	}
	return adminclient.Connect(ctx, g.nats, credsPath(e, g), caller(e))
}

// readAttempt bounds one try of a read: the node that takes a cluster-wide
// call (any of them: a NATS queue group) waits up to 2 s for each other
// node's part (admin.Config.Timeout), so a live entry answers well within
// it.
const readAttempt = 3 * time.Second

// call connects, calls op cluster-wide and closes. A read (nodes, zones,
// players, player, stats) that gets no answer within readAttempt is sent
// again while --timeout lasts: NATS hands each call to one node of the
// queue group at random, and a hung node (stopped, swapping, stalled)
// that took it answers nothing — before, one hung node of two failed 4 of
// 5 `zonectl stats` calls, the time an operator needs them most. Another
// try most likely reaches a live node, which reports the hung one as not
// answering. Mutations are sent once: a try that timed out may have
// been applied.
func call(e env, g *globals, op string, req, resp proto.Message) error {
	ctx, cancel := context.WithTimeout(context.Background(), g.timeout)
	defer cancel()
	c, err := connect(ctx, e, g)
	if err != nil {
		return err
	}
	defer c.Close()
	switch op {
	case adminclient.OpNodes, adminclient.OpZones, adminclient.OpPlayers, adminclient.OpPlayer, adminclient.OpStats:
	default:
		return c.Call(ctx, adminclient.Subject(op), req, resp)
	}
	for {
		try, cancelTry := context.WithTimeout(ctx, max(readAttempt, g.timeout/3))
		err := c.Call(try, adminclient.Subject(op), req, resp)
		cancelTry()
		if err == nil || !errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
			return err
		}
	}
}

// warnNodes reports the nodes that did not answer a fanned-out call.
func warnNodes(e env, errs []*pb.NodeError) {
	for _, ne := range errs {
		fmt.Fprintf(e.stderr, "zonectl: warning: node %s: %s\n", ne.Node, ne.Error)
	}
}

// output is the -o flag of a read command.
type outputFormat struct{ format string }

func (o *outputFormat) add(c *cobra.Command) {
	c.Flags().StringVarP(&o.format, "output", "o", "table", "output format: table, json or yaml")
}

func (o *outputFormat) check() error {
	switch o.format {
	case "table", "json", "yaml":
		return nil
	}
	return fmt.Errorf("%w: -o %q: want table, json or yaml", errUsage, o.format)
}

// write prints v as JSON or YAML, or calls table.
func (o *outputFormat) write(w io.Writer, v any, table func(tw *tabwriter.Writer)) error {
	switch o.format {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	case "yaml":
		enc := yaml.NewEncoder(w)
		enc.SetIndent(2)
		if err := enc.Encode(v); err != nil {
			return err
		}
		return enc.Close()
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	table(tw)
	return tw.Flush()
}

// Rows. Their JSON/YAML field names are an interface: scripts use them.

type nodeRow struct {
	Node        string   `json:"node" yaml:"node"`
	UDPAddr     string   `json:"udp_addr" yaml:"udp_addr"`
	HTTPAddr    string   `json:"http_addr" yaml:"http_addr"`
	Zones       []string `json:"zones" yaml:"zones"`
	Players     uint32   `json:"players" yaml:"players"`
	NPCs        uint32   `json:"npcs" yaml:"npcs"`
	Connections uint32   `json:"connections" yaml:"connections"`
	TickP99Ms   float64  `json:"tick_p99_ms" yaml:"tick_p99_ms"`
	Load        float64  `json:"load" yaml:"load"`
	Version     string   `json:"version" yaml:"version"`
	UptimeS     float64  `json:"uptime_s" yaml:"uptime_s"`
	World       string   `json:"world" yaml:"world"`
	// The node's --zones: the zones it lists, or auto.
	Listed []string `json:"listed" yaml:"listed"`
	Auto   bool     `json:"auto" yaml:"auto"`
}

type playerRow struct {
	Player      uint64  `json:"player" yaml:"player"`
	Zone        string  `json:"zone" yaml:"zone"`
	Node        string  `json:"node" yaml:"node"`
	X           float32 `json:"x" yaml:"x"`
	Y           float32 `json:"y" yaml:"y"`
	Z           float32 `json:"z" yaml:"z"`
	Epoch       uint64  `json:"epoch" yaml:"epoch"`
	View        uint32  `json:"view" yaml:"view"`
	Frozen      bool    `json:"frozen" yaml:"frozen"`
	GatewayNode string  `json:"gateway_node" yaml:"gateway_node"`
	Addr        string  `json:"addr" yaml:"addr"`
	RTTMs       float64 `json:"rtt_ms" yaml:"rtt_ms"`
	SessionAgeS float64 `json:"session_age_s" yaml:"session_age_s"`
	LastApplied uint64  `json:"last_applied" yaml:"last_applied"`
}

type statsRow struct {
	World          string  `json:"world" yaml:"world"`
	Nodes          uint32  `json:"nodes" yaml:"nodes"`
	Zones          uint32  `json:"zones" yaml:"zones"`
	ZonesUnowned   uint32  `json:"zones_unowned" yaml:"zones_unowned"`
	Players        uint32  `json:"players" yaml:"players"`
	NPCs           uint32  `json:"npcs" yaml:"npcs"`
	Connections    uint32  `json:"connections" yaml:"connections"`
	TickP99MsMax   float64 `json:"tick_p99_ms_max" yaml:"tick_p99_ms_max"`
	Handoffs       uint64  `json:"handoffs" yaml:"handoffs"`
	RemoteHandoffs uint64  `json:"remote_handoffs" yaml:"remote_handoffs"`
	Teleports      uint64  `json:"teleports" yaml:"teleports"`
}

func toNodeRow(n *pb.NodeInfo) nodeRow {
	zs := n.Zones
	if zs == nil {
		zs = []string{}
	}
	r := nodeRow{Node: n.Node, UDPAddr: n.UdpAddr, HTTPAddr: n.HttpAddr, Zones: zs, Players: n.Players, NPCs: n.Npcs,
		Connections: n.Connections, TickP99Ms: round3(n.TickP99Ms), Load: round3(n.Load), Version: n.Version,
		UptimeS: float64(n.UptimeMs) / 1000, World: n.World, Listed: n.Listed, Auto: n.Auto}
	if r.Listed == nil {
		r.Listed = []string{}
	}
	return r
}

func toPlayerRow(p *pb.PlayerInfo) playerRow {
	return playerRow{Player: p.Player, Zone: p.Zone, Node: p.Node, X: p.Position.GetX(), Y: p.Position.GetY(), Z: p.Position.GetZ(),
		Epoch: p.Epoch, View: p.View, Frozen: p.Frozen, GatewayNode: p.GatewayNode, Addr: p.Addr, RTTMs: round3(p.RttMs),
		SessionAgeS: float64(p.SessionAgeMs) / 1000, LastApplied: p.LastApplied}
}

func toStatsRow(s *pb.ClusterStatsResponse) statsRow {
	return statsRow{World: s.World, Nodes: s.Nodes, Zones: s.Zones, ZonesUnowned: s.ZonesUnowned, Players: s.Players, NPCs: s.Npcs,
		Connections: s.Connections, TickP99MsMax: round3(s.TickP99MsMax), Handoffs: s.Handoffs, RemoteHandoffs: s.RemoteHandoffs, Teleports: s.Teleports}
}

func round3(f float64) float64 {
	v, _ := strconv.ParseFloat(strconv.FormatFloat(f, 'f', 3, 64), 64)
	return v
}

func dash(s string) string { return cmp.Or(s, "-") }

// claims is a node's --zones as the table shows it: auto, the listed
// zones, or - for a node of a build that does not say.
func claims(r nodeRow) string {
	if r.Auto {
		return "auto"
	}
	return dash(strings.Join(r.Listed, ","))
}

func writePlayersTable(tw *tabwriter.Writer, rows []playerRow) {
	fmt.Fprintln(tw, "PLAYER\tZONE\tNODE\tX\tZ\tEPOCH\tGATEWAY\tRTT_MS\tSESSION_AGE")
	for _, r := range rows {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%.1f\t%.1f\t%d\t%s\t%.1f\t%s\n", r.Player, dash(r.Zone), dash(r.Node), r.X, r.Z, r.Epoch,
			dash(r.GatewayNode), r.RTTMs, (time.Duration(r.SessionAgeS*1000) * time.Millisecond).String())
	}
}

func parsePlayer(s string) (uint64, error) {
	id, err := strconv.ParseUint(s, 10, 64)
	if err != nil || id == 0 {
		return 0, fmt.Errorf("%w: player %q: want a player id (an unsigned 64-bit integer, not 0)", errUsage, s)
	}
	return id, nil
}

func oneArg(what string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) != 1 {
			return fmt.Errorf("%w: want exactly one %s, got %d arguments", errUsage, what, len(args))
		}
		return nil
	}
}

func noArgs(_ *cobra.Command, args []string) error {
	if len(args) > 0 {
		return fmt.Errorf("%w: unexpected argument %q", errUsage, args[0])
	}
	return nil
}

// exitStatus ends every admin command's help.
const exitStatus = `

Exit status: 0 done; 1 error, on standard error (NATS unreachable, credentials
refused, player/zone/node not found, a node did not answer in time); 2 usage
error.`

func addAdminCommands(root *cobra.Command, e env, g *globals) {
	defer func() {
		for _, c := range root.Commands() {
			switch c.Name() {
			case "keygen", "token", "zones", "help", "completion":
				continue
			}
			c.Long = cmp.Or(c.Long, c.Short+".") + exitStatus
		}
	}()
	{
		var o outputFormat
		c := &cobra.Command{
			Use: "nodes", Short: "list the nodes: zones, players, load, version, uptime", Args: noArgs,
			Example: "  zonectl nodes\n  zonectl nodes -o json | jq -r '.[].node'",
			RunE: func(*cobra.Command, []string) error {
				if err := o.check(); err != nil {
					return err
				}
				var resp pb.ListNodesResponse
				if err := call(e, g, adminclient.OpNodes, &pb.ListNodesRequest{}, &resp); err != nil {
					return err
				}
				warnNodes(e, resp.Errors)
				rows := make([]nodeRow, 0, len(resp.Nodes))
				for _, n := range resp.Nodes {
					rows = append(rows, toNodeRow(n))
				}
				return o.write(e.stdout, rows, func(tw *tabwriter.Writer) {
					fmt.Fprintln(tw, "NODE\tUDP_ADDR\tZONES\tCLAIMS\tPLAYERS\tNPCS\tCONNS\tTICK_P99_MS\tLOAD\tVERSION\tUPTIME")
					for _, r := range rows {
						fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%d\t%.2f\t%.2f\t%s\t%s\n", r.Node, dash(r.UDPAddr), dash(strings.Join(r.Zones, ",")), claims(r),
							r.Players, r.NPCs, r.Connections, r.TickP99Ms, r.Load, r.Version, (time.Duration(r.UptimeS) * time.Second).String())
					}
				})
			},
		}
		o.add(c)
		root.AddCommand(c)
	}
	{
		var o outputFormat
		var zone, node string
		var limit uint32
		c := &cobra.Command{
			Use: "players", Short: "list or find players: zone, node, position, RTT, session age", Args: noArgs,
			Example: "  zonectl players\n  zonectl players --zone x0z0 --limit 20\n  zonectl players --node zoned-b-7777 -o json",
			RunE: func(*cobra.Command, []string) error {
				if err := o.check(); err != nil {
					return err
				}
				var resp pb.ListPlayersResponse
				if err := call(e, g, adminclient.OpPlayers, &pb.ListPlayersRequest{Zone: zone, Node: node, Limit: limit}, &resp); err != nil {
					return err
				}
				warnNodes(e, resp.Errors)
				rows := make([]playerRow, 0, len(resp.Players))
				for _, p := range resp.Players {
					rows = append(rows, toPlayerRow(p))
				}
				return o.write(e.stdout, rows, func(tw *tabwriter.Writer) { writePlayersTable(tw, rows) })
			},
		}
		c.Flags().StringVar(&zone, "zone", "", "only players whose entity is in zone `Z`")
		c.Flags().StringVar(&node, "node", "", "only players on node `N` (its zones or its gateway)")
		c.Flags().Uint32Var(&limit, "limit", 0, "at most this many players, lowest ids first (0: all)")
		o.add(c)
		root.AddCommand(c)
	}
	{
		var o outputFormat
		c := &cobra.Command{
			Use: "player ID", Short: "show one player", Args: oneArg("player id"),
			Example: "  zonectl player 42\n  zonectl player 42 -o yaml",
			RunE: func(_ *cobra.Command, args []string) error {
				id, err := parsePlayer(args[0])
				if err != nil {
					return err
				}
				if err := o.check(); err != nil {
					return err
				}
				var resp pb.GetPlayerResponse
				if err := call(e, g, adminclient.OpPlayer, &pb.GetPlayerRequest{Player: id}, &resp); err != nil {
					return err
				}
				row := toPlayerRow(resp.Player)
				return o.write(e.stdout, row, func(tw *tabwriter.Writer) { writePlayersTable(tw, []playerRow{row}) })
			},
		}
		o.add(c)
		root.AddCommand(c)
	}
	{
		var o outputFormat
		var to, pos string
		c := &cobra.Command{
			Use:   "move ID --to ZONE [--pos X,Z]",
			Short: "move a player to another zone or position (a teleport and handoff; the client stays connected)",
			Long: `Teleport a player. The zone that owns it applies the teleport; the zone at the
new position takes the player over by the ordinary handoff (across nodes, the
cluster handoff), so the client stays connected and its ghost ids stay
stable. Without --pos the player lands in the middle of --to; without --to
the zone is the one at --pos. zonectl returns once the player is seen in
its new zone (or --timeout).`,
			Args:    oneArg("player id"),
			Example: "  zonectl move 42 --to x1z0\n  zonectl move 42 --pos 250,-300\n  zonectl move 42 --to x1z0 --pos 250,-300 -o json",
			RunE: func(_ *cobra.Command, args []string) error {
				id, err := parsePlayer(args[0])
				if err != nil {
					return err
				}
				if err := o.check(); err != nil {
					return err
				}
				req := &pb.MovePlayerRequest{Player: id, Zone: to, Caller: caller(e)}
				if pos != "" {
					xs, zs, ok := strings.Cut(pos, ",")
					x, err1 := strconv.ParseFloat(strings.TrimSpace(xs), 32)
					z, err2 := strconv.ParseFloat(strings.TrimSpace(zs), 32)
					if !ok || err1 != nil || err2 != nil {
						return fmt.Errorf("%w: --pos %q: want X,Z in metres (e.g. 250,-300)", errUsage, pos)
					}
					req.Position = &pb.Vec3{X: float32(x), Z: float32(z)}
				}
				if to == "" && pos == "" {
					return fmt.Errorf("%w: move needs --to ZONE, --pos X,Z or both", errUsage)
				}
				var resp pb.MovePlayerResponse
				if err := call(e, g, adminclient.OpMove, req, &resp); err != nil {
					return err
				}
				row := toPlayerRow(resp.Player)
				return o.write(e.stdout, row, func(tw *tabwriter.Writer) { writePlayersTable(tw, []playerRow{row}) })
			},
		}
		c.Flags().StringVar(&to, "to", "", "target `ZONE` id")
		c.Flags().StringVar(&pos, "pos", "", "target ground position `X,Z` in metres (default: the middle of --to)")
		o.add(c)
		root.AddCommand(c)
	}
	{
		var reason string
		c := &cobra.Command{
			Use:   "kick ID [--reason R]",
			Short: "end a player's session with a reason",
			Long: `Kick a player: its connection sends the client a Disconnect and closes. The
Disconnect carries one of the protocol's reasons: --reason names one
(kicked, server shutdown, duplicate session, timeout, protocol error,
client quit), or is free text that is logged while the client is told
"kicked".`,
			Args:    oneArg("player id"),
			Example: "  zonectl kick 42\n  zonectl kick 42 --reason \"abusive chat, ticket 1234\"\n  zonectl kick 42 --reason \"server shutdown\"",
			RunE: func(_ *cobra.Command, args []string) error {
				id, err := parsePlayer(args[0])
				if err != nil {
					return err
				}
				var resp pb.KickPlayerResponse
				if err := call(e, g, adminclient.OpKick, &pb.KickPlayerRequest{Player: id, Reason: reason, Caller: caller(e)}, &resp); err != nil {
					return err
				}
				if resp.Note != "" {
					// Free text is the operator's note, logged by the node; the
					// client is told the reason. Say both, so nobody reads the
					// reason and thinks the note was dropped.
					fmt.Fprintf(e.stdout, "kicked player %d on node %s (reason %q; note %q logged)\n", id, resp.Node, resp.Reason, resp.Note)
					return nil
				}
				fmt.Fprintf(e.stdout, "kicked player %d on node %s (reason %q)\n", id, resp.Node, resp.Reason)
				return nil
			},
		}
		c.Flags().StringVar(&reason, "reason", "", "disconnect reason name or free-text note (default: kicked)")
		root.AddCommand(c)
	}
	{
		var deadline time.Duration
		var last bool
		c := &cobra.Command{
			Use:   "drain NODE",
			Short: "take a node out of service (its zones go to the other nodes)",
			Long: `Drain a node: its graceful shutdown. Each of its zones is handed to another
live node (frozen, its players' final state written, claimed by the
target at a new epoch, its players restored there: players connected to
other nodes play on, nothing lost); then its own connections end (reason
"server shutdown") and the zoned process exits. The answer comes before
the drain runs.

The last live node is not drained unless --last is given: no other node
would take its zones, so its players would be disconnected (their
records written) and the world's zones stop until a node starts.

A node whose process embeds the NATS server the other nodes use (zoned
without --nats) is not drained while they live, --last or not: its NATS
would stop under them, and the zones it handed them with it. Drain the
others first, or run NATS apart from zoned in a cluster.`,
			Args:    oneArg("node id"),
			Example: "  zonectl drain zoned-b-7777\n  zonectl drain zoned-a-7777 --last   # the world's only node: everyone is disconnected",
			RunE: func(_ *cobra.Command, args []string) error {
				var resp pb.DrainResponse
				if err := call(e, g, adminclient.OpDrain, &pb.DrainRequest{Node: args[0], DeadlineMs: deadline.Milliseconds(), Caller: caller(e), Last: last}, &resp); err != nil {
					return err
				}
				fmt.Fprintf(e.stdout, "node %s %s (%d zones, %d players)\n", resp.Node, resp.State, resp.Zones, resp.Players)
				return nil
			},
		}
		c.Flags().DurationVar(&deadline, "deadline", 0, "bound the drain to this long (0: the node's shutdown timeout)")
		c.Flags().BoolVar(&last, "last", false, "drain even the last live node: its zones stop and its players are disconnected until a node starts")
		root.AddCommand(c)
	}
	{
		var to string
		c := &cobra.Command{
			Use:   "move-zone ZONE --to NODE",
			Short: "hand a zone to another node (zone migration, nobody disconnected)",
			Long: `Move a zone, with every entity in it, to another live node: the owner
freezes it, writes its players' final state to their records, releases
its lease, and the target claims it at a new epoch and restores the
players there. Players keep their connections; no move is lost or
applied twice. The answer names the new owner and epoch. The zone
stays where it was put: rebalancing gives the target's other zones to a
node below its share, never this one, until the zone leaves that node
(a drain, another move, a lost lease, the node's restart).`,
			Args:    oneArg("zone id"),
			Example: "  zonectl move-zone x1z0 --to zoned-c-7777",
			RunE: func(_ *cobra.Command, args []string) error {
				if to == "" {
					return fmt.Errorf("%w: move-zone needs --to NODE", errUsage)
				}
				var resp pb.MoveZoneResponse
				if err := call(e, g, adminclient.OpMoveZone, &pb.MoveZoneRequest{Zone: args[0], ToNode: to, Caller: caller(e)}, &resp); err != nil {
					return err
				}
				if resp.FromNode == resp.ToNode {
					fmt.Fprintf(e.stdout, "zone %s already runs on %s (epoch %d): nothing moved\n", resp.Zone, resp.Owner, resp.Epoch)
					return nil
				}
				fmt.Fprintf(e.stdout, "zone %s moved from %s to %s (owner %s, epoch %d)\n", resp.Zone, resp.FromNode, resp.ToNode, resp.Owner, resp.Epoch)
				return nil
			},
		}
		c.Flags().StringVar(&to, "to", "", "target `NODE` id (zonectl nodes lists them)")
		root.AddCommand(c)
	}
	{
		var o outputFormat
		c := &cobra.Command{
			Use: "stats", Short: "cluster totals: nodes, zones, players, NPCs, handoffs", Args: noArgs,
			Example: "  zonectl stats\n  zonectl stats -o json",
			RunE: func(*cobra.Command, []string) error {
				if err := o.check(); err != nil {
					return err
				}
				var resp pb.ClusterStatsResponse
				if err := call(e, g, adminclient.OpStats, &pb.ClusterStatsRequest{}, &resp); err != nil {
					return err
				}
				warnNodes(e, resp.Errors)
				row := toStatsRow(&resp)
				return o.write(e.stdout, row, func(tw *tabwriter.Writer) { writeStatsTable(tw, row) })
			},
		}
		o.add(c)
		root.AddCommand(c)
	}
	{
		var interval time.Duration
		var count int
		c := &cobra.Command{
			Use: "watch", Short: "print cluster stats and nodes every --interval until interrupted", Args: noArgs,
			Example: "  zonectl watch\n  zonectl watch --interval 5s --count 3",
			RunE: func(*cobra.Command, []string) error {
				if interval <= 0 {
					return fmt.Errorf("%w: --interval %s: want a positive duration", errUsage, interval)
				}
				for i := 0; count == 0 || i < count; i++ {
					if i > 0 {
						time.Sleep(interval)
					}
					var st pb.ClusterStatsResponse
					if err := call(e, g, adminclient.OpStats, &pb.ClusterStatsRequest{}, &st); err != nil {
						return err
					}
					var ns pb.ListNodesResponse
					if err := call(e, g, adminclient.OpNodes, &pb.ListNodesRequest{}, &ns); err != nil {
						return err
					}
					fmt.Fprintf(e.stdout, "%s  world %s: %d nodes, %d zones (%d unowned), %d players, %d NPCs, tick p99 max %.2f ms, %d handoffs (%d remote)\n",
						e.now().UTC().Format(time.TimeOnly), st.World, st.Nodes, st.Zones, st.ZonesUnowned, st.Players, st.Npcs,
						st.TickP99MsMax, st.Handoffs, st.RemoteHandoffs)
					tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
					fmt.Fprintln(tw, "  NODE\tZONES\tPLAYERS\tCONNS\tTICK_P99_MS\tLOAD")
					for _, n := range ns.Nodes {
						fmt.Fprintf(tw, "  %s\t%s\t%d\t%d\t%.2f\t%.2f\n", n.Node, dash(strings.Join(n.Zones, ",")), n.Players, n.Connections, n.TickP99Ms, n.Load)
					}
					_ = tw.Flush()
					warnNodes(e, append(st.Errors, ns.Errors...))
				}
				return nil
			},
		}
		c.Flags().DurationVar(&interval, "interval", 2*time.Second, "time between two updates")
		c.Flags().IntVar(&count, "count", 0, "stop after this many updates (0: until interrupted)")
		root.AddCommand(c)
	}
}

func writeStatsTable(tw *tabwriter.Writer, r statsRow) {
	fmt.Fprintln(tw, "WORLD\tNODES\tZONES\tUNOWNED\tPLAYERS\tNPCS\tCONNS\tTICK_P99_MS_MAX\tHANDOFFS\tREMOTE_HANDOFFS\tTELEPORTS")
	fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%.2f\t%d\t%d\t%d\n", dash(r.World), r.Nodes, r.Zones, r.ZonesUnowned, r.Players, r.NPCs,
		r.Connections, r.TickP99MsMax, r.Handoffs, r.RemoteHandoffs, r.Teleports)
}
