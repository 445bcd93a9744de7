package deploy

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// natsOf is the render's NATS StatefulSet, its server container and the
// server options its nats.conf gives (parsed by the nats-server zoned
// embeds, with the pod's environment: server name and passwords).
func natsOf(t *testing.T, b *bundle, external map[string]map[string]string) (*appsv1.StatefulSet, *corev1.Container, *natsserver.Options) {
	t.Helper()
	st, ok := b.statefulSets["nats"]
	if !ok {
		return nil, nil, nil
	}
	c := containerNamed(st, "nats")
	if c == nil {
		t.Fatalf("%s: StatefulSet nats has no container nats", b.dir)
	}
	if len(c.Args) != 2 || c.Args[0] != "--config" {
		t.Fatalf("%s: nats args %q, want --config FILE", b.dir, c.Args)
	}
	mounts := mountConfigMaps(t, b, st, c, nil)
	conf, ok := localPath(mounts, c.Args[1])
	if !ok {
		t.Fatalf("%s: nats --config %s is not in a mounted ConfigMap", b.dir, c.Args[1])
	}
	p := resolvePod(t, b, st, c, "127.0.0.1", external)
	for k, v := range p.env {
		t.Setenv(k, v)
	}
	opts, err := natsserver.ProcessConfigFile(conf)
	if err != nil {
		t.Fatalf("%s: nats.conf: %v", b.dir, err)
	}
	return st, c, opts
}

// TestNATSCluster: the NATS cluster's routes name exactly its own pods
// through its headless Service on the cluster port; the ports the config
// opens are the container's; JetStream stores on the claimed volume; the
// grace period outlasts lame-duck mode; the image is the release zoned
// embeds.
func TestNATSCluster(t *testing.T) {
	checked := 0
	for _, dir := range kustomizations {
		b := render(t, dir)
		st, c, opts := natsOf(t, b, testSecrets(t))
		if st == nil {
			continue
		}
		checked++
		t.Run(dir, func(t *testing.T) {
			replicas := int(*st.Spec.Replicas)
			if replicas < 3 {
				t.Errorf("nats replicas %d, want 3 or more (JetStream quorum survives one loss)", replicas)
			}
			cluster, _ := namedPort(c, "cluster")
			client, _ := namedPort(c, "nats")
			monitor, _ := namedPort(c, "monitor")
			if opts.Cluster.Port != int(cluster.ContainerPort) || opts.Port != int(client.ContainerPort) || opts.HTTPPort != int(monitor.ContainerPort) {
				t.Errorf("nats.conf ports cluster %d, client %d, http %d; container ports %d, %d, %d",
					opts.Cluster.Port, opts.Port, opts.HTTPPort, cluster.ContainerPort, client.ContainerPort, monitor.ContainerPort)
			}
			if opts.Cluster.Name == "" {
				t.Error("nats.conf: the cluster has no name")
			}
			// The cluster runs the release zoned embeds, and the one this
			// test parses nats.conf with: a bump of one is a bump of all.
			embedded, parser := natsServerVersion(t, "../go.mod"), natsServerVersion(t, "go.mod")
			tag := strings.TrimPrefix(embedded, "v") + "-alpine"
			if c.Image != "nats:"+tag || parser != embedded {
				t.Errorf("nats image %q, want %q (zoned embeds nats-server %s; this module parses with %s)", c.Image, "nats:"+tag, embedded, parser)
			}
			// The Helm values beside the manifests name the same release
			// (the chart itself cannot be rendered here).
			if v, err := os.ReadFile("k8s/nats-cluster/values.yaml"); err != nil || !strings.Contains(string(v), "tag: "+tag+"\n") {
				t.Errorf("k8s/nats-cluster/values.yaml: want the image tag %s (err %v)", tag, err)
			}
			want := map[string]bool{}
			for i := range replicas {
				want[net.JoinHostPort(fmt.Sprintf("%s-%d.%s", st.Name, i, st.Spec.ServiceName), fmt.Sprint(cluster.ContainerPort))] = true
			}
			got := map[string]bool{}
			for _, r := range opts.Routes {
				got[r.Host] = true
				if !want[r.Host] {
					t.Errorf("route %s is not one of this StatefulSet's pods on the cluster port (want %v)", r, want)
				}
			}
			if len(got) != len(want) {
				t.Errorf("%d routes for %d pods: %v", len(got), len(want), opts.Routes)
			}
			hs := b.services[st.Spec.ServiceName]
			if hs == nil || !hs.Spec.PublishNotReadyAddresses {
				t.Errorf("headless Service %s must publish not-ready addresses, or the servers cannot find each other to become ready", st.Spec.ServiceName)
			}
			if !opts.JetStream {
				t.Error("nats.conf: JetStream is off")
			}
			store := false
			for _, m := range c.VolumeMounts {
				for _, vc := range st.Spec.VolumeClaimTemplates {
					store = store || (m.Name == vc.Name && m.MountPath == opts.StoreDir)
				}
			}
			if !store {
				t.Errorf("JetStream store_dir %s is not on a volume claim template", opts.StoreDir)
			}
			grace := time.Duration(*st.Spec.Template.Spec.TerminationGracePeriodSeconds) * time.Second
			if ld := opts.LameDuckDuration + opts.LameDuckGracePeriod; grace <= ld {
				t.Errorf("grace period %v does not outlast lame duck %v", grace, ld)
			}
			if c.Lifecycle == nil || c.Lifecycle.PreStop == nil || c.Lifecycle.PreStop.Exec == nil ||
				!strings.Contains(strings.Join(c.Lifecycle.PreStop.Exec.Command, " "), "ldm="+opts.PidFile) {
				t.Errorf("preStop must put the server into lame-duck mode through its pid file %s", opts.PidFile)
			}
			users := map[string]bool{}
			for _, u := range opts.Users {
				users[u.Username] = u.Password != "" && !strings.HasPrefix(u.Password, "$")
			}
			for _, u := range []string{"node", "admin"} {
				if !users[u] {
					t.Errorf("nats.conf: no user %s with a password from the environment (users %v)", u, users)
				}
			}
		})
	}
	if checked == 0 {
		t.Fatal("no render has a NATS cluster")
	}
}

// natsServerVersion is the nats-server version a go.mod requires.
func natsServerVersion(t *testing.T, gomod string) string {
	t.Helper()
	b, err := os.ReadFile(gomod)
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "github.com/nats-io/nats-server/v2" {
			return f[1]
		}
	}
	t.Fatalf("%s does not require github.com/nats-io/nats-server/v2", gomod)
	return ""
}

// startRenderedNATS runs the render's nats.conf as one server on loopback:
// the accounts, users and permissions are the manifest's, the cluster block
// is dropped (one server cannot form the three-server JetStream group).
func startRenderedNATS(t *testing.T, b *bundle, external map[string]map[string]string) net.Listener {
	t.Helper()
	st, _, opts := natsOf(t, b, external)
	if st == nil {
		t.Fatalf("%s: zoned joins NATS, but the render has no NATS StatefulSet", b.dir)
	}
	opts.Cluster = natsserver.ClusterOpts{}
	opts.Routes = nil
	opts.Host, opts.Port, opts.HTTPPort = "127.0.0.1", -1, 0
	opts.StoreDir = t.TempDir()
	opts.PidFile = ""
	opts.NoSigs, opts.NoLog = true, true
	srv, err := natsserver.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		t.Fatal("nats-server with the rendered config not ready within 10s")
	}
	t.Cleanup(srv.Shutdown)
	return addrListener{srv.Addr()}
}

// addrListener carries the server's address back (only Addr is used).
type addrListener struct{ a net.Addr }

func (l addrListener) Accept() (net.Conn, error) { return nil, errors.New("not a listener") }
func (l addrListener) Close() error              { return nil }
func (l addrListener) Addr() net.Addr            { return l.a }

// TestNATSPermissions: with the rendered nats.conf, the admin user cannot
// publish on the world's subjects or write the buckets (it cannot pose as a
// node or forge a lease), and the node user cannot make cluster-wide admin
// calls. That zoned itself runs as node is TestZonedContract (prod).
func TestNATSPermissions(t *testing.T) {
	b := render(t, "k8s/overlays/prod")
	secrets := testSecrets(t)
	addr := startRenderedNATS(t, b, secrets).Addr().String()
	pw := secrets["ghostwire-nats-auth"]
	for _, tc := range []struct {
		name, user, password, subject string
	}{
		{"admin publishes on a zone subject", "admin", pw["admin-password"], "gw.w.zone.x0z0.in"},
		{"admin writes a zone lease", "admin", pw["admin-password"], "$KV.ghostwire_zones.x0z0"},
		{"node calls the cluster-wide admin API", "node", pw["node-password"], "gwadmin.kick"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := make(chan error, 4)
			nc, err := nats.Connect("nats://"+addr, nats.UserInfo(tc.user, tc.password),
				nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { errs <- err }))
			if err != nil {
				t.Fatalf("connect as %s: %v", tc.user, err)
			}
			defer nc.Close()
			if err := nc.Publish(tc.subject, []byte("x")); err != nil {
				t.Fatal(err)
			}
			if err := nc.FlushTimeout(5 * time.Second); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-errs:
				if !errors.Is(err, nats.ErrPermissionViolation) {
					t.Errorf("publish %s as %s: %v, want a permissions violation", tc.subject, tc.user, err)
				}
			case <-time.After(5 * time.Second):
				t.Errorf("publish %s as %s was allowed", tc.subject, tc.user)
			}
		})
	}
	if _, err := nats.Connect("nats://"+addr, nats.UserInfo("node", "wrong")); err == nil {
		t.Error("a wrong password was accepted")
	}
}

// TestNATSAuthIsTheAdminIssues: the cluster's users and permissions are
// deploy/nats/auth.conf, the file the embedded NATS is tested against
// (actors/node), not a variant of it.
func TestNATSAuthIsTheAdminIssues(t *testing.T) {
	canonical, err := os.ReadFile("nats/auth.conf")
	if err != nil {
		t.Fatal(err)
	}
	copied, err := os.ReadFile("k8s/nats-cluster/auth.conf")
	if err != nil {
		t.Fatal(err)
	}
	if string(copied) != string(canonical) {
		t.Fatal("k8s/nats-cluster/auth.conf differs from nats/auth.conf: cp deploy/nats/auth.conf deploy/k8s/nats-cluster/auth.conf")
	}
	b := render(t, "k8s/nats-cluster")
	for _, v := range b.statefulSets["nats"].Spec.Template.Spec.Volumes {
		if v.ConfigMap != nil && b.configMaps[v.ConfigMap.Name].Data["auth.conf"] == string(canonical) {
			return
		}
	}
	t.Fatal("no ConfigMap mounted into the NATS pods carries auth.conf")
}
