package deploy

import (
	"bufio"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// The real zoned, built once from the parent module (the product), so the
// flags and probe paths checked are the ones the image will run.
var zonedBin struct {
	once      sync.Once
	dir, path string
	help      string
	err       error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if zonedBin.dir != "" {
		os.RemoveAll(zonedBin.dir)
	}
	os.Exit(code)
}

func zoned(t *testing.T) (path, help string) {
	t.Helper()
	zonedBin.once.Do(func() {
		zonedBin.dir, zonedBin.err = os.MkdirTemp("", "deploy-zoned-")
		if zonedBin.err != nil {
			return
		}
		zonedBin.path = filepath.Join(zonedBin.dir, "zoned")
		// `go test` puts its own toolchain's bin first on PATH.
		cmd := exec.Command("go", "build", "-o", zonedBin.path, "./cmd/zoned")
		cmd.Dir = ".."
		if out, err := cmd.CombinedOutput(); err != nil {
			zonedBin.err = fmt.Errorf("go build ./cmd/zoned: %v\n%s", err, out)
			return
		}
		out, err := exec.Command(zonedBin.path, "--help").Output()
		if err != nil {
			zonedBin.err = fmt.Errorf("zoned --help: %v", err)
		}
		zonedBin.help = string(out)
	})
	if zonedBin.err != nil {
		t.Fatal(zonedBin.err)
	}
	return zonedBin.path, zonedBin.help
}

var helpFlag = regexp.MustCompile(`(?m)^\s+(?:-\w, )?--([a-z0-9-]+)`)

// zonedFlags is every flag `zoned --help` documents.
func zonedFlags(t *testing.T) map[string]bool {
	_, help := zoned(t)
	flags := map[string]bool{}
	for _, m := range helpFlag.FindAllStringSubmatch(help, -1) {
		flags[m[1]] = true
	}
	if !flags["nats"] || !flags["public-addr"] || !flags["shutdown-timeout"] {
		t.Fatalf("zoned --help lists no --nats, --public-addr or --shutdown-timeout; the parser is out of step:\n%s", help)
	}
	return flags
}

// parseArgs reads a container's args as zoned flags. The manifests write
// every flag as --name=value (or a bare --name for a true boolean), so an
// argument is never mistaken for the value of the one before.
func parseArgs(args []string) (map[string]string, error) {
	out := map[string]string{}
	for _, a := range args {
		if !strings.HasPrefix(a, "--") {
			return nil, fmt.Errorf("argument %q: write flags as --name=value", a)
		}
		name, val, ok := strings.Cut(a[2:], "=")
		if !ok {
			val = "true"
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("flag --%s given twice", name)
		}
		out[name] = val
	}
	return out, nil
}

// TestZonedFlagsAreReal: every flag the manifests pass, and every
// GHOSTWIRE_* variable they set, is one zoned has.
func TestZonedFlagsAreReal(t *testing.T) {
	known := zonedFlags(t)
	for _, dir := range kustomizations {
		b := render(t, dir)
		st, ok := b.statefulSets["zoned"]
		if !ok {
			continue
		}
		c := containerNamed(st, "zoned")
		flags, err := parseArgs(c.Args)
		if err != nil {
			t.Errorf("%s: %v", dir, err)
		}
		for f := range flags {
			if !known[f] {
				t.Errorf("%s: zoned has no flag --%s (zoned --help)", dir, f)
			}
		}
		for _, e := range c.Env {
			name, ok := strings.CutPrefix(e.Name, "GHOSTWIRE_")
			if !ok || name == "TOKEN_KEY" {
				continue
			}
			if f := strings.ToLower(strings.ReplaceAll(name, "_", "-")); !known[f] {
				t.Errorf("%s: env %s names no zoned flag (--%s)", dir, e.Name, f)
			}
		}
	}
}

// testSecrets stands in for the Secrets an operator creates, in the form
// the README's commands give them.
func testSecrets(t *testing.T) map[string]map[string]string {
	hexOf := func(n int) string {
		b := make([]byte, n)
		if _, err := rand.Read(b); err != nil {
			t.Fatal(err)
		}
		return hex.EncodeToString(b)
	}
	return map[string]map[string]string{
		"ghostwire-token-key": {"key": hexOf(32)},
		"ghostwire-nats-auth": {"node-password": "gw" + hexOf(24), "admin-password": "gw" + hexOf(24)},
	}
}

// pod is what the kubelet would give one container of a StatefulSet's pod
// number 0: its environment resolved and $(VAR) references expanded.
type pod struct {
	name, hostIP string
	env          map[string]string
	order        []string
}

func resolvePod(t *testing.T, b *bundle, st *appsv1.StatefulSet, c *corev1.Container, hostIP string, external map[string]map[string]string) *pod {
	t.Helper()
	p := &pod{name: st.Name + "-0", hostIP: hostIP, env: map[string]string{}}
	for _, e := range c.Env {
		var v string
		switch {
		case e.ValueFrom == nil:
			v = p.expand(e.Value)
		case e.ValueFrom.FieldRef != nil:
			switch e.ValueFrom.FieldRef.FieldPath {
			case "metadata.name":
				v = p.name
			case "status.hostIP":
				v = hostIP
			default:
				t.Fatalf("%s: env %s: field %s not modelled here", b.dir, e.Name, e.ValueFrom.FieldRef.FieldPath)
			}
		case e.ValueFrom.SecretKeyRef != nil:
			r := e.ValueFrom.SecretKeyRef
			if s, ok := b.secrets[r.Name]; ok {
				v = string(s.Data[r.Key])
				if sv, ok := s.StringData[r.Key]; ok {
					v = sv
				}
			} else {
				v = external[r.Name][r.Key]
			}
		case e.ValueFrom.ConfigMapKeyRef != nil:
			v = b.configMaps[e.ValueFrom.ConfigMapKeyRef.Name].Data[e.ValueFrom.ConfigMapKeyRef.Key]
		default:
			t.Fatalf("%s: env %s: source not modelled here", b.dir, e.Name)
		}
		p.env[e.Name] = v
		p.order = append(p.order, e.Name)
	}
	return p
}

// expand does what the kubelet does to args and env values: $(VAR) becomes
// the variable's value when defined, $$ an escaped $.
func (p *pod) expand(s string) string {
	return varRef.ReplaceAllStringFunc(s, func(m string) string {
		if v, ok := p.env[m[2:len(m)-1]]; ok {
			return v
		}
		return m
	})
}

func (p *pod) environ() []string {
	out := []string{"PATH=" + os.Getenv("PATH")}
	for _, k := range p.order {
		out = append(out, k+"="+p.env[k])
	}
	return out
}

// mountConfigMaps writes the ConfigMaps and Secrets a container mounts
// into temp dirs and returns the mount path → local dir mapping. A Secret
// comes from the render, else from external (the ones an operator
// creates, testSecrets).
func mountConfigMaps(t *testing.T, b *bundle, st *appsv1.StatefulSet, c *corev1.Container, external map[string]map[string]string) map[string]string {
	vols := map[string]map[string]string{}
	for _, v := range st.Spec.Template.Spec.Volumes {
		switch {
		case v.ConfigMap != nil:
			vols[v.Name] = b.configMaps[v.ConfigMap.Name].Data
		case v.Secret != nil:
			data := external[v.Secret.SecretName]
			if s, ok := b.secrets[v.Secret.SecretName]; ok {
				data = map[string]string{}
				for k, v := range s.Data {
					data[k] = string(v)
				}
				maps.Copy(data, s.StringData)
			}
			vols[v.Name] = data
		}
	}
	out := map[string]string{}
	for _, m := range c.VolumeMounts {
		files, ok := vols[m.Name]
		if !ok {
			continue
		}
		dir := t.TempDir()
		for k, v := range files {
			if err := os.WriteFile(filepath.Join(dir, k), []byte(v), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		out[m.MountPath] = dir
	}
	return out
}

// localPath maps a path inside the container to the materialized mount.
func localPath(mounts map[string]string, path string) (string, bool) {
	for mp, dir := range mounts {
		if rest, ok := strings.CutPrefix(path, mp+"/"); ok {
			return filepath.Join(dir, rest), true
		}
	}
	return "", false
}

// shutdownTimeout is zoned's --shutdown-timeout as the manifest sets it:
// the flag, else the mounted --config file's shutdown_timeout, else the
// default `zoned --help` prints.
func shutdownTimeout(t *testing.T, flags map[string]string, mounts map[string]string) time.Duration {
	if v, ok := flags["shutdown-timeout"]; ok {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("--shutdown-timeout=%s: %v", v, err)
		}
		return d
	}
	if f, ok := flags["config"]; ok {
		local, ok := localPath(mounts, f)
		if !ok {
			t.Fatalf("--config=%s is not in a mounted ConfigMap", f)
		}
		raw, err := os.ReadFile(local)
		if err != nil {
			t.Fatalf("--config=%s: the ConfigMap has no such key: %v", f, err)
		}
		var cfg struct {
			ShutdownTimeout string `json:"shutdown_timeout"`
		}
		if err := json.Unmarshal(raw, &cfg); err != nil {
			t.Fatalf("--config=%s: %v", f, err)
		}
		if cfg.ShutdownTimeout != "" {
			d, err := time.ParseDuration(cfg.ShutdownTimeout)
			if err != nil {
				t.Fatalf("%s shutdown_timeout: %v", f, err)
			}
			return d
		}
	}
	_, help := zoned(t)
	m := regexp.MustCompile(`--shutdown-timeout duration.*\(default ([0-9a-z.]+)\)`).FindStringSubmatch(help)
	if m == nil {
		t.Fatal("zoned --help shows no default for --shutdown-timeout")
	}
	d, _ := time.ParseDuration(m[1])
	return d
}

func portOf(t *testing.T, what, addr string) int32 {
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("%s %q: %v", what, addr, err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatalf("%s %q: %v", what, addr, err)
	}
	return int32(n)
}

// TestZonedContract runs the real zoned with each render's arguments,
// environment and mounted config on loopback, and checks what the manifest
// promises about it: the node id is the pod name, the token names the
// node's address (IPv6 too), the probe and scrape paths answer on the port
// the probes use, --zones is auto, and SIGTERM ends it within the grace
// period, which exceeds preStop plus the shutdown timeout.
func TestZonedContract(t *testing.T) {
	bin, _ := zoned(t)
	n := 0
	for _, dir := range kustomizations {
		b := render(t, dir)
		st, ok := b.statefulSets["zoned"]
		if !ok {
			continue
		}
		// Alternate the families: an IPv6 status.hostIP must work unbracketed.
		hostIP := []string{"127.0.0.1", "fd00::1"}[n%2]
		n++
		t.Run(dir, func(t *testing.T) { zonedContract(t, bin, b, st, hostIP) })
	}
	if n < 2 {
		t.Fatalf("only %d renders run zoned", n)
	}
}

func zonedContract(t *testing.T, bin string, b *bundle, st *appsv1.StatefulSet, hostIP string) {
	spec := st.Spec.Template.Spec
	c := containerNamed(st, "zoned")
	if c == nil {
		t.Fatal("StatefulSet zoned has no container zoned")
	}
	flags, err := parseArgs(c.Args)
	if err != nil {
		t.Fatal(err)
	}
	external := testSecrets(t)
	p := resolvePod(t, b, st, c, hostIP, external)
	mounts := mountConfigMaps(t, b, st, c, external)

	// Static: what the flags say against what the pod spec says.
	if got := p.expand(flags["node-id"]); got != p.name {
		t.Errorf("--node-id expands to %q, want the pod name %q", got, p.name)
	}
	if flags["zones"] != "auto" {
		t.Errorf("--zones=%q, want auto", flags["zones"])
	}
	httpPort, ok := namedPort(c, "http")
	if !ok || httpPort.ContainerPort != portOf(t, "--http", flags["http"]) {
		t.Errorf("--http=%s does not listen on the container port named http (%d)", flags["http"], httpPort.ContainerPort)
	}
	if host, _, _ := net.SplitHostPort(flags["http"]); host != "0.0.0.0" && host != "" && host != "::" {
		t.Errorf("--http=%s: the kubelet and Prometheus reach the pod from outside; bind all interfaces", flags["http"])
	}
	game, ok := namedPort(c, "game")
	if !ok || game.Protocol != corev1.ProtocolUDP || game.ContainerPort != portOf(t, "--udp", flags["udp"]) {
		t.Errorf("--udp=%s is not the UDP container port named game (%+v)", flags["udp"], game)
	}
	public := p.expand(flags["public-addr"])
	wantPublic := netip.AddrPortFrom(netip.MustParseAddr(hostIP), uint16(game.ContainerPort))
	if spec.HostNetwork {
		if game.HostPort != 0 && game.HostPort != game.ContainerPort {
			t.Errorf("hostNetwork with hostPort %d != containerPort %d", game.HostPort, game.ContainerPort)
		}
	} else if game.HostPort != game.ContainerPort {
		t.Errorf("game port: hostPort %d, want %d (the default reachability is hostPort; --public-addr names it)", game.HostPort, game.ContainerPort)
	}
	for what, probe := range map[string]*corev1.Probe{"startup": c.StartupProbe, "readiness": c.ReadinessProbe, "liveness": c.LivenessProbe} {
		if port, _ := resolvePort(c, probe.HTTPGet.Port); port != httpPort.ContainerPort {
			t.Errorf("%s probe on port %d, zoned serves HTTP on %d", what, port, httpPort.ContainerPort)
		}
	}
	if c.ReadinessProbe.HTTPGet.Path != "/readyz" || c.LivenessProbe.HTTPGet.Path != "/healthz" {
		t.Errorf("readiness %s, liveness %s: want /readyz (zones claimed, gateway up) and /healthz", c.ReadinessProbe.HTTPGet.Path, c.LivenessProbe.HTTPGet.Path)
	}
	ann := st.Spec.Template.Annotations
	if ann["prometheus.io/scrape"] != "true" || ann["prometheus.io/port"] != strconv.Itoa(int(httpPort.ContainerPort)) {
		t.Errorf("scrape annotations %v do not point at the http port %d", ann, httpPort.ContainerPort)
	}
	timeout := shutdownTimeout(t, flags, mounts)
	var preStop time.Duration
	if h := c.Lifecycle; h != nil && h.PreStop != nil && h.PreStop.Sleep != nil {
		preStop = time.Duration(h.PreStop.Sleep.Seconds) * time.Second
	}
	grace := time.Duration(*spec.TerminationGracePeriodSeconds) * time.Second
	if grace <= preStop+timeout {
		t.Errorf("terminationGracePeriodSeconds %v must exceed preStop %v + shutdown timeout %v, or the kubelet kills zoned mid-drain", grace, preStop, timeout)
	}

	// Dynamic: run it. The listen addresses move to free loopback ports
	// (flags given later win); everything else is the manifest's.
	var args []string
	for _, a := range c.Args {
		a = p.expand(a)
		if name, val, ok := strings.Cut(a, "="); ok {
			if local, ok := localPath(mounts, val); ok {
				a = name + "=" + local
			}
		}
		args = append(args, a)
	}
	args = append(args, "--udp=127.0.0.1:0", "--http=127.0.0.1:0", "--nats-listen=127.0.0.1:0", "--data="+t.TempDir())
	if u, ok := p.env["GHOSTWIRE_NATS"]; ok {
		p.env["GHOSTWIRE_NATS"] = natsForZoned(t, b, u, external)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = p.environ()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	ready := make(chan map[string]any, 1)
	var logMu sync.Mutex
	var logBuf strings.Builder
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			logMu.Lock()
			logBuf.WriteString(sc.Text() + "\n")
			logMu.Unlock()
			var rec map[string]any
			if json.Unmarshal(sc.Bytes(), &rec) == nil && rec["msg"] == "zoned ready" {
				ready <- rec
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
		exited <- cmd.Wait()
	}()
	logs := func() string { logMu.Lock(); defer logMu.Unlock(); return logBuf.String() }
	defer func() {
		_ = cmd.Process.Kill()
	}()
	var rec map[string]any
	select {
	case rec = <-ready:
	case err := <-exited:
		t.Fatalf("zoned %s exited before ready: %v\n%s", strings.Join(args, " "), err, logs())
	case <-time.After(60 * time.Second):
		t.Fatalf("zoned not ready within 60s\n%s", logs())
	}
	if rec["node"] != p.name {
		t.Errorf("zoned ready as node %v, want %s", rec["node"], p.name)
	}
	if rec["public"] != wantPublic.String() {
		t.Errorf("--public-addr=%s: tokens name %v, want %s", public, rec["public"], wantPublic)
	}
	if rec["owned"] == "" {
		t.Errorf("zoned owns no zone alone in its world: %v", rec)
	}
	// The token key is the mounted Secret's, read from the file zoned
	// watches (so a rotation reaches running pods), not a dev key.
	if f, ok := flags["key-file"]; !ok {
		t.Errorf("no --key-file: the token key must be a mounted Secret file (a variable cannot change in a running pod)")
	} else if local, ok := localPath(mounts, f); !ok {
		t.Errorf("--key-file=%s is not in a mounted volume", f)
	} else if raw, err := os.ReadFile(local); err != nil {
		t.Errorf("--key-file=%s: %v", f, err)
	} else if k, err := hex.DecodeString(strings.TrimSpace(string(raw))); err != nil || len(k) != 32 {
		t.Errorf("--key-file=%s holds no 64-hex-digit key: %v", f, err)
	} else if sum := sha256.Sum256(k); rec["token_key"] != "file" || rec["token_keys"] != hex.EncodeToString(sum[:4]) {
		t.Errorf("zoned's key: %v %v, want the file's (fingerprint %x)", rec["token_key"], rec["token_keys"], sum[:4])
	}
	httpAddr, _ := rec["http"].(string)
	client := &http.Client{Timeout: 5 * time.Second}
	paths := map[string]string{"startup probe": c.StartupProbe.HTTPGet.Path, "readiness probe": c.ReadinessProbe.HTTPGet.Path,
		"liveness probe": c.LivenessProbe.HTTPGet.Path, "scrape": ann["prometheus.io/path"]}
	for what, path := range paths {
		resp, err := client.Get("http://" + httpAddr + path)
		if err != nil {
			t.Errorf("%s GET %s: %v", what, path, err)
			continue
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s GET %s: %s, want 200 from a ready zoned", what, path, resp.Status)
		}
	}
	// SIGTERM is what the kubelet sends after preStop; zoned must be gone
	// well within the rest of the grace period.
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("zoned exited with %v after SIGTERM, want 0\n%s", err, logs())
		}
	case <-time.After(grace - preStop):
		t.Errorf("zoned still running %v after SIGTERM (the kubelet would SIGKILL it)\n%s", grace-preStop, logs())
	}
	// Secrets reach zoned through its environment; none may reach its log.
	for name, keys := range external {
		for k, v := range keys {
			if strings.Contains(logs(), v) {
				t.Errorf("zoned logged Secret %s key %s", name, k)
			}
		}
	}
}

// natsForZoned starts the render's NATS (its nats.conf, one server, on
// loopback) and returns zoned's NATS URL pointed at it, after checking the
// URL names a Service of the render on its client port.
func natsForZoned(t *testing.T, b *bundle, raw string, external map[string]map[string]string) string {
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("GHOSTWIRE_NATS %q: %v", raw, err)
	}
	svc, ok := b.services[u.Hostname()]
	if !ok {
		t.Fatalf("GHOSTWIRE_NATS names host %s, which is no Service in the render", u.Hostname())
	}
	port := portOf(t, "GHOSTWIRE_NATS", u.Host)
	found := false
	for _, sp := range svc.Spec.Ports {
		found = found || sp.Port == port
	}
	if !found {
		t.Fatalf("GHOSTWIRE_NATS port %d is not a port of Service %s", port, svc.Name)
	}
	srv := startRenderedNATS(t, b, external)
	u.Host = srv.Addr().String()
	return u.String()
}

// TestMakeClusterUsesTheManifestConfig: `make cluster`, the local stand-in
// for the cluster, starts its nodes with the very file the manifests mount
// as zoned's --config (not a copy), and with the flags the dev overlay adds.
func TestMakeClusterUsesTheManifestConfig(t *testing.T) {
	base := render(t, "k8s/base")
	st := base.statefulSets["zoned"]
	c := containerNamed(st, "zoned")
	flags, err := parseArgs(c.Args)
	if err != nil {
		t.Fatal(err)
	}
	mounts := mountConfigMaps(t, base, st, c, nil)
	local, ok := localPath(mounts, flags["config"])
	if !ok {
		t.Fatalf("--config=%s is not a mounted ConfigMap", flags["config"])
	}
	rendered, err := os.ReadFile(local)
	if err != nil {
		t.Fatal(err)
	}
	source := filepath.Join("k8s/base", filepath.Base(flags["config"]))
	onDisk, err := os.ReadFile(source)
	if err != nil || string(onDisk) != string(rendered) {
		t.Fatalf("the ConfigMap behind --config is not generated from %s (%v)", source, err)
	}
	mk := exec.Command("make", "-n", "-C", "..", "cluster")
	// Under `make test` the parent make's flags and jobserver would leak in.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "MAKEFLAGS=") && !strings.HasPrefix(kv, "MFLAGS=") && !strings.HasPrefix(kv, "MAKELEVEL=") {
			mk.Env = append(mk.Env, kv)
		}
	}
	out, err := mk.CombinedOutput()
	if err != nil {
		t.Fatalf("make -n cluster: %v\n%s", err, out)
	}
	recipe := string(out)
	if want := "--config deploy/" + source; !strings.Contains(recipe, want) {
		t.Errorf("make cluster does not start zoned with %s", want)
	}
	dev := containerNamed(render(t, "k8s/overlays/dev").statefulSets["zoned"], "zoned")
	for _, a := range dev.Args {
		if !slices.Contains(c.Args, a) && !strings.Contains(recipe, a) {
			t.Errorf("the dev overlay passes %s; make cluster does not", a)
		}
	}
}
