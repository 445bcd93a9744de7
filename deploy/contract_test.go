package deploy

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// externalSecrets are the Secrets an operator creates by hand, never
// committed: deploy/README.md gives the command for each, with exactly these
// keys (TestReadmeCreatesExternalSecrets). A manifest may reference a Secret
// only if the render holds it or it is listed here.
var externalSecrets = map[string][]string{
	"ghostwire-token-key": {"key"},
	"ghostwire-nats-auth": {"node-password", "admin-password"},
}

// TestContract checks, in every render, what the objects promise each other:
// references resolve, selectors select, ports and probes line up, pods run
// restricted and images are pinned.
func TestContract(t *testing.T) {
	for _, dir := range kustomizations {
		t.Run(dir, func(t *testing.T) {
			b := render(t, dir)
			checkReferences(t, b)
			checkServices(t, b)
			checkPDBs(t, b)
			for _, n := range sortedKeys(b.statefulSets) {
				checkPodSecurity(t, b, b.statefulSets[n])
				checkProbesAndPorts(t, b, b.statefulSets[n])
			}
		})
	}
}

// checkReferences: every Secret, ConfigMap and key a pod reads exists, and
// every StatefulSet's governing Service exists and is headless.
func checkReferences(t *testing.T, b *bundle) {
	secretKey := func(what, name, key string) {
		if s, ok := b.secrets[name]; ok {
			if _, ok := s.Data[key]; !ok {
				if _, ok := s.StringData[key]; !ok {
					t.Errorf("%s: %s reads key %q of Secret %s, which has no such key", b.dir, what, key, name)
				}
			}
			return
		}
		if keys, ok := externalSecrets[name]; !ok || !slices.Contains(keys, key) {
			t.Errorf("%s: %s reads Secret %s key %q: not in the render and not a documented external Secret", b.dir, what, name, key)
		}
	}
	for _, n := range sortedKeys(b.statefulSets) {
		st := b.statefulSets[n]
		spec := st.Spec.Template.Spec
		if _, ok := b.services[st.Spec.ServiceName]; !ok {
			t.Errorf("%s: StatefulSet %s names Service %q, which is not in the render", b.dir, n, st.Spec.ServiceName)
		} else if svc := b.services[st.Spec.ServiceName]; svc.Spec.ClusterIP != corev1.ClusterIPNone {
			t.Errorf("%s: StatefulSet %s's governing Service %s is not headless", b.dir, n, svc.Name)
		}
		volumes := map[string]bool{}
		for _, v := range spec.Volumes {
			volumes[v.Name] = true
			if v.ConfigMap != nil {
				cm, ok := b.configMaps[v.ConfigMap.Name]
				if !ok {
					t.Errorf("%s: %s volume %s: ConfigMap %s is not in the render", b.dir, n, v.Name, v.ConfigMap.Name)
				}
				for _, it := range v.ConfigMap.Items {
					if _, ok := cm.Data[it.Key]; !ok && cm != nil {
						t.Errorf("%s: %s volume %s: ConfigMap %s has no key %s", b.dir, n, v.Name, v.ConfigMap.Name, it.Key)
					}
				}
			}
			if v.Secret != nil {
				if _, ok := b.secrets[v.Secret.SecretName]; !ok {
					if _, ok := externalSecrets[v.Secret.SecretName]; !ok {
						t.Errorf("%s: %s volume %s: Secret %s is neither rendered nor documented", b.dir, n, v.Name, v.Secret.SecretName)
					}
				}
			}
		}
		for _, vc := range st.Spec.VolumeClaimTemplates {
			if volumes[vc.Name] {
				t.Errorf("%s: %s: volume %s is both a pod volume and a claim template", b.dir, n, vc.Name)
			}
			volumes[vc.Name] = true
		}
		for _, c := range spec.Containers {
			for _, m := range c.VolumeMounts {
				if !volumes[m.Name] {
					t.Errorf("%s: %s container %s mounts %s, which is no volume or claim template", b.dir, n, c.Name, m.Name)
				}
			}
			for _, e := range c.Env {
				if e.ValueFrom == nil {
					continue
				}
				if r := e.ValueFrom.SecretKeyRef; r != nil {
					secretKey(n+" env "+e.Name, r.Name, r.Key)
				}
				if r := e.ValueFrom.ConfigMapKeyRef; r != nil {
					if cm, ok := b.configMaps[r.Name]; !ok {
						t.Errorf("%s: %s env %s: ConfigMap %s is not in the render", b.dir, n, e.Name, r.Name)
					} else if _, ok := cm.Data[r.Key]; !ok {
						t.Errorf("%s: %s env %s: ConfigMap %s has no key %s", b.dir, n, e.Name, r.Name, r.Key)
					}
				}
			}
			// Kubernetes leaves an undefined $(VAR) in args and env values
			// as it is: a typo would reach zoned as a literal.
			for _, a := range append(append([]string{}, c.Command...), c.Args...) {
				for _, v := range varRefs(a) {
					if !definedBefore(c.Env, len(c.Env), v) {
						t.Errorf("%s: %s container %s: argument %q refers to $(%s), which its env does not define", b.dir, n, c.Name, a, v)
					}
				}
			}
			for i, e := range c.Env {
				for _, v := range varRefs(e.Value) {
					if !definedBefore(c.Env, i, v) {
						t.Errorf("%s: %s env %s refers to $(%s), which is not defined above it", b.dir, n, e.Name, v)
					}
				}
			}
		}
	}
}

var varRef = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

func varRefs(s string) []string {
	var out []string
	for _, m := range varRef.FindAllStringSubmatch(strings.ReplaceAll(s, "$$", ""), -1) {
		out = append(out, m[1])
	}
	return out
}

func definedBefore(env []corev1.EnvVar, i int, name string) bool {
	for _, e := range env[:i] {
		if e.Name == name {
			return true
		}
	}
	return false
}

// checkServices: every Service selects the pods of exactly one StatefulSet
// and every port it forwards to exists there with the same protocol.
func checkServices(t *testing.T, b *bundle) {
	for _, n := range sortedKeys(b.services) {
		svc := b.services[n]
		st := b.podsOf(t, "Service "+n, selectorOf(svc.Spec.Selector))
		if st == nil {
			continue
		}
		for _, p := range svc.Spec.Ports {
			if !containerHasPort(st, p.TargetPort, p.Port, p.Protocol) {
				t.Errorf("%s: Service %s port %s targets %s/%v, which no container of %s exposes", b.dir, n, p.Name, p.Protocol, p.TargetPort.String(), st.Name)
			}
		}
	}
}

func containerHasPort(st *appsv1.StatefulSet, target intstr.IntOrString, port int32, proto corev1.Protocol) bool {
	if proto == "" {
		proto = corev1.ProtocolTCP
	}
	for _, c := range st.Spec.Template.Spec.Containers {
		for _, cp := range c.Ports {
			cproto := cp.Protocol
			if cproto == "" {
				cproto = corev1.ProtocolTCP
			}
			if cproto != proto {
				continue
			}
			switch {
			case target.Type == intstr.String && target.StrVal == cp.Name:
				return true
			case target.Type == intstr.Int && target.IntVal == cp.ContainerPort:
				return true
			case target.Type == intstr.Int && target.IntVal == 0 && port == cp.ContainerPort:
				return true
			}
		}
	}
	return false
}

// checkPDBs: every StatefulSet is covered by exactly one budget, which
// selects its pods (and only its) and lets at most one go at a time.
func checkPDBs(t *testing.T, b *bundle) {
	covered := map[string]int{}
	for _, n := range sortedKeys(b.pdbs) {
		pdb := b.pdbs[n]
		st := b.podsOf(t, "PodDisruptionBudget "+n, pdb.Spec.Selector)
		if st == nil {
			continue
		}
		covered[st.Name]++
		if mu := pdb.Spec.MaxUnavailable; mu == nil || mu.IntValue() != 1 {
			t.Errorf("%s: PodDisruptionBudget %s: maxUnavailable %v, want 1", b.dir, n, mu)
		}
	}
	for _, n := range sortedKeys(b.statefulSets) {
		if covered[n] != 1 {
			t.Errorf("%s: StatefulSet %s is covered by %d PodDisruptionBudgets, want 1", b.dir, n, covered[n])
		}
	}
}

// checkPodSecurity: non-root, no privilege escalation, read-only root,
// no capabilities, the runtime's seccomp profile, pinned images,
// resources set, and the pods spread over machines.
func checkPodSecurity(t *testing.T, b *bundle, st *appsv1.StatefulSet) {
	spec := st.Spec.Template.Spec
	psc := spec.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser == 0 {
		t.Errorf("%s: %s: pod securityContext must set runAsNonRoot and a non-zero runAsUser", b.dir, st.Name)
	}
	if psc == nil || psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("%s: %s: pod seccompProfile must be RuntimeDefault", b.dir, st.Name)
	}
	if a := spec.Affinity; a == nil || a.PodAntiAffinity == nil || len(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) == 0 {
		t.Errorf("%s: %s: no required pod anti-affinity", b.dir, st.Name)
	} else {
		for _, term := range a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
			if term.TopologyKey != "kubernetes.io/hostname" || b.podsOf(t, st.Name+" anti-affinity", term.LabelSelector) != st {
				t.Errorf("%s: %s: anti-affinity must keep its own pods on different hosts", b.dir, st.Name)
			}
		}
	}
	for _, c := range append(append([]corev1.Container{}, spec.InitContainers...), spec.Containers...) {
		sc := c.SecurityContext
		switch {
		case sc == nil:
			t.Errorf("%s: %s container %s has no securityContext", b.dir, st.Name, c.Name)
			continue
		case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
			t.Errorf("%s: %s container %s: allowPrivilegeEscalation must be false", b.dir, st.Name, c.Name)
		case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
			t.Errorf("%s: %s container %s: readOnlyRootFilesystem must be true", b.dir, st.Name, c.Name)
		case sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) > 0:
			t.Errorf("%s: %s container %s: capabilities must drop ALL and add none", b.dir, st.Name, c.Name)
		case sc.Privileged != nil && *sc.Privileged:
			t.Errorf("%s: %s container %s is privileged", b.dir, st.Name, c.Name)
		}
		if !pinned(c.Image) {
			t.Errorf("%s: %s container %s: image %q is not pinned to a tag or digest", b.dir, st.Name, c.Name, c.Image)
		}
		if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
			t.Errorf("%s: %s container %s: set cpu and memory requests and a memory limit", b.dir, st.Name, c.Name)
		}
	}
}

func pinned(image string) bool {
	if strings.Contains(image, "@sha256:") {
		return true
	}
	name := image[strings.LastIndex(image, "/")+1:]
	i := strings.LastIndex(name, ":")
	return i > 0 && name[i+1:] != "" && name[i+1:] != "latest"
}

// checkProbesAndPorts: every probe's port is a port of its container.
func checkProbesAndPorts(t *testing.T, b *bundle, st *appsv1.StatefulSet) {
	for _, c := range st.Spec.Template.Spec.Containers {
		for what, p := range map[string]*corev1.Probe{"startup": c.StartupProbe, "readiness": c.ReadinessProbe, "liveness": c.LivenessProbe} {
			if p == nil {
				t.Errorf("%s: %s container %s has no %s probe", b.dir, st.Name, c.Name, what)
				continue
			}
			if p.HTTPGet == nil {
				t.Errorf("%s: %s container %s: %s probe is not an HTTP GET", b.dir, st.Name, c.Name, what)
				continue
			}
			if _, ok := resolvePort(&c, p.HTTPGet.Port); !ok {
				t.Errorf("%s: %s container %s: %s probe port %s is not a container port", b.dir, st.Name, c.Name, what, p.HTTPGet.Port.String())
			}
		}
	}
}

func resolvePort(c *corev1.Container, p intstr.IntOrString) (int32, bool) {
	for _, cp := range c.Ports {
		if (p.Type == intstr.String && cp.Name == p.StrVal) || (p.Type == intstr.Int && cp.ContainerPort == p.IntVal) {
			return cp.ContainerPort, true
		}
	}
	return 0, false
}

func selectorOf(m map[string]string) *metav1.LabelSelector {
	if len(m) == 0 {
		return nil
	}
	return &metav1.LabelSelector{MatchLabels: m}
}

// TestReadmeCreatesExternalSecrets: the README's commands create every
// external Secret with exactly the keys the manifests read.
func TestReadmeCreatesExternalSecrets(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	cmds := secretCommands(string(readme))
	for name, keys := range externalSecrets {
		if len(cmds[name]) == 0 {
			t.Errorf("README.md has no `kubectl create secret generic %s` command", name)
			continue
		}
		want := slices.Clone(keys)
		slices.Sort(want)
		for _, got := range cmds[name] {
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Errorf("README.md creates Secret %s with keys %v, the manifests read %v", name, got, want)
			}
		}
	}
}

var fromKey = regexp.MustCompile(`--from-(?:literal|file)=([A-Za-z0-9._-]+)=`)

// secretCommands finds `kubectl create secret generic NAME ...` commands
// (continued over lines ending in a backslash) and the keys each creates.
func secretCommands(doc string) map[string][][]string {
	out := map[string][][]string{}
	lines := strings.Split(doc, "\n")
	for i := 0; i < len(lines); i++ {
		l := strings.TrimSpace(lines[i])
		const pre = "kubectl create secret generic "
		j := strings.Index(l, pre)
		if j < 0 {
			continue
		}
		cmd := l[j+len(pre):]
		for strings.HasSuffix(strings.TrimSpace(lines[i]), `\`) && i+1 < len(lines) {
			i++
			cmd += " " + strings.TrimSpace(lines[i])
		}
		name := strings.Fields(cmd)[0]
		var keys []string
		for _, m := range fromKey.FindAllStringSubmatch(cmd, -1) {
			keys = append(keys, m[1])
		}
		out[name] = append(out[name], keys)
	}
	return out
}
