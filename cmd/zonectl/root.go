package main

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/ghostwire/ghostwire/actors/tokenkey"
)

// cobra gives zonectl what a growing admin CLI needs and pflag alone does
// not: nested subcommands with shared (persistent) flags, generated shell
// completion (`zonectl completion bash`), and help with examples per
// command. The older commands (keygen, token, zones) keep their own pflag
// sets unchanged: cobra passes their arguments through.

// globals are the flags every admin command shares.
type globals struct {
	nats    string
	creds   string
	data    string
	timeout time.Duration
}

const rootLong = `zonectl — ghostwire admin CLI.

The admin commands (nodes, zones, players, player, move, kick, drain, stats,
watch) call the admin API that every zoned serves over NATS (the
ghostwire_admin micro service). Credentials come from --creds FILE, else
$GHOSTWIRE_CREDS, else DATA/admin.creds that a dev zoned writes into its data
dir (--data, default ghostwire-data). With no flags zonectl talks to the
NATS of a 'go run ./cmd/zoned' started in the same directory.

Reads print a table, or -o json / -o yaml (stable snake_case field names).
Errors go to standard error.

Exit status: 0 done, 1 error (NATS unreachable, credentials refused, player
not found, a node did not answer), 2 usage error.`

const rootExample = `  zonectl nodes
  zonectl zones -o json
  zonectl players --zone x0z0
  zonectl player 42 -o yaml
  zonectl move 42 --to x1z0 --pos 250,-300
  zonectl kick 42 --reason "cheating"
  zonectl drain zoned-b-7777
  zonectl watch --interval 2s
  zonectl --nats nats://10.0.0.5:4222 --creds ops.creds stats
  source <(zonectl completion bash)`

func newRoot(e env) *cobra.Command {
	g := &globals{}
	root := &cobra.Command{
		Use:           "zonectl",
		Short:         "ghostwire admin CLI",
		Long:          rootLong,
		Example:       rootExample,
		SilenceErrors: true,
		SilenceUsage:  true,
		Args:          cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cmd.SetOut(e.stdout)
			_ = cmd.Help()
			return errNoCommand
		},
	}
	root.SetOut(e.stdout)
	root.SetErr(e.stderr)
	pf := root.PersistentFlags()
	pf.StringVar(&g.nats, "nats", defaultNATS, "NATS `URL` of the cluster (a dev zoned embeds NATS at the default)")
	pf.StringVar(&g.creds, "creds", "", "credentials `FILE` (user/password as zoned writes them, or a NATS .creds); default $GHOSTWIRE_CREDS, else DATA/admin.creds")
	pf.StringVar(&g.data, "data", tokenkey.DefaultDataDir, "zoned data `DIR` whose admin.creds is used when neither --creds nor $GHOSTWIRE_CREDS is set")
	pf.DurationVar(&g.timeout, "timeout", 10*time.Second, "give up on a call after this long (a move waits for the player to settle)")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return fmt.Errorf("%w: %v", errUsage, err) })

	// The older commands parse their own flags, as before.
	for _, name := range []string{"keygen", "token", "zones"} {
		c := commands[name]
		root.AddCommand(&cobra.Command{
			Use: name, Short: c.summary, DisableFlagParsing: true,
			RunE: func(_ *cobra.Command, args []string) error {
				var err error
				if name == "zones" {
					err = runZonesWith(e, g, args)
				} else {
					err = c.run(e, args)
				}
				if errors.Is(err, pflag.ErrHelp) {
					return nil // the command printed its own help; cobra would print its short one after it
				}
				return err
			},
		})
	}
	addAdminCommands(root, e, g)
	return root
}

// errNoCommand: zonectl without a command prints help and exits 2.
var errNoCommand = errors.New("no command")

func runCobra(args []string, e env) int {
	root := newRoot(e)
	root.SetArgs(offlineArgs(args))
	err := root.Execute()
	switch {
	case err == nil, errors.Is(err, pflag.ErrHelp):
		return 0
	case errors.Is(err, errNoCommand):
		return 2
	case errors.Is(err, errUsage), strings.HasPrefix(err.Error(), "unknown command"),
		strings.Contains(err.Error(), "arg(s)"), strings.HasPrefix(err.Error(), "unknown flag"):
		fmt.Fprintln(e.stderr, "zonectl:", err)
		return 2
	default:
		fmt.Fprintln(e.stderr, "zonectl:", err)
		return 1
	}
}

// offlineArgs rewrites the global flags given before keygen or token,
// which parse their own flags (cobra hands them every argument): without
// it `zonectl --nats URL token …` (a shell alias of zonectl with its
// cluster) failed with "unknown flag: --nats", and a global --timeout
// became token's --timeout, the connection's idle timeout, without a
// word. --nats, --creds and --timeout reach no cluster from an offline
// command and are dropped; --data means the same to token (the dev key's
// directory) and is kept for it, ahead of the command's own flags, which
// win. Anything else is left as it is, for cobra to judge.
func offlineArgs(args []string) []string {
	var data []string
	i := 0
	for ; i < len(args) && strings.HasPrefix(args[i], "--") && args[i] != "--"; i++ {
		name, val, inline := strings.Cut(args[i][2:], "=")
		switch name {
		case "nats", "creds", "data", "timeout":
		default:
			return args
		}
		if !inline {
			if i+1 >= len(args) {
				return args
			}
			i++
			val = args[i]
		}
		if name == "data" {
			data = []string{"--data", val}
		}
	}
	if i >= len(args) || (args[i] != "token" && args[i] != "keygen") {
		return args
	}
	out := []string{args[i]}
	if args[i] == "token" {
		out = append(out, data...)
	}
	return append(out, args[i+1:]...)
}
