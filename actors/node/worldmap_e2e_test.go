package node

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"go.uber.org/goleak"

	"github.com/ghostwire/ghostwire/client"
	"github.com/ghostwire/ghostwire/replication/move"
)

// browserWait bounds TestWorldMapInBrowser's browser: its launch and
// first page load plus the steps' own bounds (25 s), with room for a
// starved host's launch.
const browserWait = 90 * time.Second

var updateMapShot = flag.Bool("worldmap.readme", false, "write the world map screenshot to docs/img/worldmap.png")

// findChromium returns Debian's chromium (or another Chrome on PATH).
func findChromium() (string, error) {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("no chromium on PATH: install Debian's chromium (apt-get install chromium; .ci/run does) — this test opens the world map in a real browser")
}

// The live world map as a person sees it: zoned runs with a few walking
// UDP clients; headless Chromium opens http://HTTP/ (redirected to /map),
// and the page draws the 4 zones with their owner and the players and NPCs
// as dots, which move; a click on a player's dot shows its details. The
// screenshots are kept (the path is logged); -worldmap.readme refreshes
// docs/img/worldmap.png.
//
// chromedp drives the browser over the DevTools protocol: the page keeps an
// event stream open, so `chromium --headless --screenshot/--dump-dom` never
// sees it settle, and a click needs a live page.
func TestWorldMapInBrowser(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent(), ignoreThrottle)
	chrome, err := findChromium()
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t)
	cfg.NPCs = 400
	n, err := Start(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Stop(context.Background())

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const players = 6
	for i := range players {
		s, err := client.Dial(ctx, n.PublicAddr().String(), mint(t, n, uint64(100+i)))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close(context.Background())
		if err := s.SetInput(move.Move{Forward: 127, Yaw: uint16(i * 65536 / players)}); err != nil {
			t.Fatal(err)
		}
	}

	// The browser's own bound: its launch and first page load (bounded by
	// nothing else) and the steps below, each bounded on its own (10 +
	// 5 + 5 + 5 s of waits). It was the dials' 30 s context: at load 20-25
	// under -race the launch, the page and the steps took 25-27 s in runs
	// that passed, and the runs that failed hit that context's deadline
	// in whichever step was running then (the page's load, a screenshot, a
	// read), never a step's own bound (4 of 8 runs failed so, 2026-12-01).
	browserCtx, browserCancel := context.WithTimeout(context.Background(), browserWait)
	defer browserCancel()
	actx, acancel := chromedp.NewExecAllocator(browserCtx, append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chrome), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.WindowSize(1100, 700))...)
	defer acancel()
	bctx, bcancel := chromedp.NewContext(actx)
	defer bcancel()

	// attr reads the page's state, which it keeps in data attributes of
	// <body> (data-players → dataset.players).
	attr := func(name string) string {
		v, err := chromedp.Run(bctx, chromedp.Evaluate[string](fmt.Sprintf("document.body.getAttribute(%q) || ''", name)))
		if err != nil {
			t.Fatalf("read %s: %v", name, err)
		}
		return v
	}
	// waitAttr polls the page's DOM state (bounded) until cond holds.
	waitAttr := func(what string, within time.Duration, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(within)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within %v (state %s, zones %s, players %s, npcs %s, frames %s)", what, within,
					attr("data-state"), attr("data-zones"), attr("data-players"), attr("data-npcs"), attr("data-frames"))
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	num := func(name string) int { v, _ := strconv.Atoi(attr(name)); return v }

	t0 := time.Now()
	if _, err := chromedp.Run(bctx, chromedp.Navigate("http://"+n.HTTPAddr()+"/")); err != nil {
		t.Fatalf("open the map: %v (after %v)", err, time.Since(t0).Round(time.Millisecond))
	}
	t.Logf("browser up and the map opened after %v", time.Since(t0).Round(time.Millisecond))
	if url, err := chromedp.Run(bctx, chromedp.Location()); err != nil || !strings.HasSuffix(url, "/map") {
		t.Errorf("/ led to %q (%v), want /map", url, err)
	}
	waitAttr("4 zones, every player and NPC drawn", 10*time.Second, func() bool {
		return attr("data-state") == "live" && num("data-zones") == 4 && num("data-players") == players && num("data-npcs") == cfg.NPCs
	})
	shot := func() []byte {
		b, err := chromedp.Run(bctx, chromedp.CaptureScreenshot())
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	first, hash := shot(), attr("data-player-hash")
	waitAttr("the players' dots move", 5*time.Second, func() bool { return attr("data-player-hash") != hash })
	second := shot()
	if bytes.Equal(first, second) {
		t.Error("two screenshots a few frames apart are identical: nothing moved on screen")
	}

	// Click one player's dot: its details appear beside the map.
	xy := strings.Split(attr("data-first-player"), ",")
	if len(xy) != 2 {
		t.Fatalf("no player dot position on the page (%q)", attr("data-first-player"))
	}
	x, _ := strconv.ParseFloat(xy[0], 64)
	z, _ := strconv.ParseFloat(xy[1], 64)
	if _, err := chromedp.Run(bctx, chromedp.MouseClickXY(x, z)); err != nil {
		t.Fatal(err)
	}
	waitAttr("a clicked player's details", 5*time.Second, func() bool { return attr("data-details-kind") == "player" })
	details, err := chromedp.Run(bctx, chromedp.Evaluate[string](`document.getElementById("details").innerText`))
	if err != nil {
		t.Fatal(err)
	}
	sel := attr("data-selected")
	if id, err := strconv.ParseUint(sel, 10, 64); err != nil || id < 100 || id >= 100+players ||
		!strings.Contains(details, sel) || !strings.Contains(details, "zone") || !regexp.MustCompile(`RTT\s+[0-9.]+ ms`).MatchString(details) {
		t.Errorf("details of %q: %q", sel, details)
	}
	final := shot()

	// The clients' packets have fates and RTTs by now (folded once a
	// second): the packet-loss and RTT metrics the Grafana dashboard charts
	// are fed.
	waitAttr("packet fates and RTTs counted", 5*time.Second, func() bool {
		_, rtts, _ := n.Gateway().RTT().Snapshot()
		return n.Gateway().Stats().PacketsDelivered > 0 && rtts > 0
	})
	t.Logf("world map live after %v", time.Since(t0).Round(time.Millisecond))

	dir := filepath.Join(os.TempDir(), "ghostwire-artifacts")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{"worldmap-1.png": first, "worldmap-2.png": second, "worldmap-clicked.png": final} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot: %s", p)
	}
	if *updateMapShot {
		if err := os.WriteFile(filepath.Join("..", "..", "docs", "img", "worldmap.png"), final, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
