package deploy

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/kustomize/api/krusty"
	kustomizetypes "sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// kustomizations are every directory an operator may apply (or build on):
// each must render on its own and keep the contract.
var kustomizations = []string{
	"k8s/base",
	"k8s/nats-cluster",
	"k8s/overlays/dev",
	"k8s/overlays/prod",
	"k8s/overlays/prod-host-network",
}

// bundle is one rendered kustomization, decoded into the API types.
type bundle struct {
	dir          string
	statefulSets map[string]*appsv1.StatefulSet
	services     map[string]*corev1.Service
	configMaps   map[string]*corev1.ConfigMap
	secrets      map[string]*corev1.Secret
	pdbs         map[string]*policyv1.PodDisruptionBudget
	netpols      map[string]*networkingv1.NetworkPolicy
}

// apiVersions is every kind the manifests may contain, with the one API
// version each must use. Anything else is an error: a kind the test cannot
// decode strictly is a kind it cannot vouch for.
var apiVersions = map[string]string{
	"StatefulSet":         "apps/v1",
	"Service":             "v1",
	"ConfigMap":           "v1",
	"Secret":              "v1",
	"PodDisruptionBudget": "policy/v1",
	"NetworkPolicy":       "networking.k8s.io/v1",
}

// render runs kustomize (the library kubectl embeds) over dir, as
// `kubectl kustomize dir` would, and decodes every object strictly: a field
// the Kubernetes type does not have is an error, not silently dropped.
func render(t *testing.T, dir string) *bundle {
	t.Helper()
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	m, err := k.Run(filesys.MakeFsOnDisk(), abs)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	b := &bundle{dir: dir,
		statefulSets: map[string]*appsv1.StatefulSet{}, services: map[string]*corev1.Service{},
		configMaps: map[string]*corev1.ConfigMap{}, secrets: map[string]*corev1.Secret{},
		pdbs: map[string]*policyv1.PodDisruptionBudget{}, netpols: map[string]*networkingv1.NetworkPolicy{}}
	for _, r := range m.Resources() {
		y, err := r.AsYAML()
		if err != nil {
			t.Fatal(err)
		}
		kind, name := r.GetKind(), r.GetName()
		want, ok := apiVersions[kind]
		if !ok {
			t.Errorf("%s: %s %s: a kind this test does not decode; add it to apiVersions with its type", dir, kind, name)
			continue
		}
		if got := r.GetApiVersion(); got != want {
			t.Errorf("%s: %s %s: apiVersion %s, want %s", dir, kind, name, got, want)
		}
		var obj interface{ GetName() string }
		switch kind {
		case "StatefulSet":
			o := &appsv1.StatefulSet{}
			obj, b.statefulSets[name] = o, o
		case "Service":
			o := &corev1.Service{}
			obj, b.services[name] = o, o
		case "ConfigMap":
			o := &corev1.ConfigMap{}
			obj, b.configMaps[name] = o, o
		case "Secret":
			o := &corev1.Secret{}
			obj, b.secrets[name] = o, o
		case "PodDisruptionBudget":
			o := &policyv1.PodDisruptionBudget{}
			obj, b.pdbs[name] = o, o
		case "NetworkPolicy":
			o := &networkingv1.NetworkPolicy{}
			obj, b.netpols[name] = o, o
		}
		if err := yaml.UnmarshalStrict(y, obj); err != nil {
			t.Errorf("%s: %s %s does not decode strictly into the API type: %v\n%s", dir, kind, name, err, y)
		}
	}
	return b
}

func TestRenderStrict(t *testing.T) {
	for _, dir := range kustomizations {
		t.Run(dir, func(t *testing.T) {
			b := render(t, dir)
			if len(b.statefulSets) == 0 {
				t.Errorf("%s renders no StatefulSet", dir)
			}
		})
	}
}

// TestStrictDecodingRejectsUnknownFields proves the decoding above is strict:
// a misspelt field (here readinessProbes) must fail, not vanish.
func TestStrictDecodingRejectsUnknownFields(t *testing.T) {
	y := []byte("apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: x}\nspec:\n  template:\n    spec:\n      containers:\n        - name: x\n          readinessProbes: {}\n")
	if err := yaml.UnmarshalStrict(y, &appsv1.StatefulSet{}); err == nil {
		t.Fatal("a StatefulSet with an unknown field decoded without error")
	}
}

// podsOf is the StatefulSet whose pods a selector picks, checked to be
// exactly one.
func (b *bundle) podsOf(t *testing.T, what string, sel *metav1.LabelSelector) *appsv1.StatefulSet {
	t.Helper()
	if sel == nil || (len(sel.MatchLabels) == 0 && len(sel.MatchExpressions) == 0) {
		t.Errorf("%s: %s has an empty selector (it would select every pod in the namespace)", b.dir, what)
		return nil
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		t.Errorf("%s: %s: %v", b.dir, what, err)
		return nil
	}
	var hit []*appsv1.StatefulSet
	for _, n := range sortedKeys(b.statefulSets) {
		st := b.statefulSets[n]
		if s.Matches(labels.Set(st.Spec.Template.Labels)) {
			hit = append(hit, st)
		}
	}
	if len(hit) != 1 {
		t.Errorf("%s: %s selects the pods of %d StatefulSets, want exactly 1", b.dir, what, len(hit))
		return nil
	}
	return hit[0]
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func namedPort(c *corev1.Container, name string) (corev1.ContainerPort, bool) {
	for _, p := range c.Ports {
		if p.Name == name {
			return p, true
		}
	}
	return corev1.ContainerPort{}, false
}

func containerNamed(st *appsv1.StatefulSet, name string) *corev1.Container {
	for i := range st.Spec.Template.Spec.Containers {
		if c := &st.Spec.Template.Spec.Containers[i]; c.Name == name {
			return c
		}
	}
	return nil
}

func (b *bundle) String() string { return fmt.Sprintf("render of %s", b.dir) }

// TestGrafanaDashboardConfigMap: k8s/monitoring turns deploy/grafana's
// dashboard into a ConfigMap the Grafana sidecar loads, unchanged.
func TestGrafanaDashboardConfigMap(t *testing.T) {
	opts := krusty.MakeDefaultOptions()
	opts.LoadRestrictions = kustomizetypes.LoadRestrictionsNone
	abs, err := filepath.Abs("k8s/monitoring")
	if err != nil {
		t.Fatal(err)
	}
	m, err := krusty.MakeKustomizer(opts).Run(filesys.MakeFsOnDisk(), abs)
	if err != nil {
		t.Fatalf("kustomize build --load-restrictor LoadRestrictionsNone k8s/monitoring: %v", err)
	}
	want, err := os.ReadFile("grafana/ghostwire.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Resources()) != 1 {
		t.Fatalf("%d objects, want the one ConfigMap", len(m.Resources()))
	}
	y, err := m.Resources()[0].AsYAML()
	if err != nil {
		t.Fatal(err)
	}
	var cm corev1.ConfigMap
	if err := yaml.UnmarshalStrict(y, &cm); err != nil {
		t.Fatal(err)
	}
	if cm.Labels["grafana_dashboard"] != "1" || cm.Data["ghostwire.json"] != string(want) {
		t.Fatalf("ConfigMap %s: labels %v, dashboard carried unchanged: %v", cm.Name, cm.Labels, cm.Data["ghostwire.json"] == string(want))
	}
	if !json.Valid(want) {
		t.Fatal("grafana/ghostwire.json is not JSON")
	}
}
