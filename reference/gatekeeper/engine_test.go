package gatekeeper

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/open-policy-agent/gatekeeper/v3/pkg/mutation"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/mutation/path/parser"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/mutation/types"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

func obj(t *testing.T, y string) *unstructured.Unstructured {
	t.Helper()
	j, err := yaml.YAMLToJSON([]byte(y))
	if err != nil {
		t.Fatalf("bad yaml: %v\n%s", err, y)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(j); err != nil {
		t.Fatalf("bad object: %v\n%s", err, y)
	}
	return u
}

func ns(name string, labels map[string]string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}

func canon(t *testing.T, u *unstructured.Unstructured) string {
	t.Helper()
	if u == nil {
		return "null"
	}
	j, err := json.Marshal(u.Object)
	if err != nil {
		t.Fatal(err)
	}
	var v interface{}
	if err := json.Unmarshal(j, &v); err != nil {
		t.Fatal(err)
	}
	out, _ := json.MarshalIndent(v, "", "  ")
	return string(out)
}

func withVersion(y, version string) string {
	return strings.ReplaceAll(y, "VERSION", version)
}

// ---- mutators -------------------------------------------------------------

const assignAlwaysPull = `
apiVersion: mutations.gatekeeper.sh/VERSION
kind: Assign
metadata:
  name: always-pull
spec:
  applyTo:
  - groups: [""]
    kinds: ["Pod"]
    versions: ["v1"]
  match:
    scope: Namespaced
    kinds:
    - apiGroups: ["*"]
      kinds: ["Pod"]
  location: "spec.containers[name:*].imagePullPolicy"
  parameters:
    assign:
      value: Always
`

const assignMetaOwner = `
apiVersion: mutations.gatekeeper.sh/VERSION
kind: AssignMetadata
metadata:
  name: owner-label
spec:
  match:
    scope: Namespaced
  location: metadata.labels.owner
  parameters:
    assign:
      value: platform
`

const modifySetMerge = `
apiVersion: mutations.gatekeeper.sh/VERSION
kind: ModifySet
metadata:
  name: add-verbose
spec:
  applyTo:
  - groups: [""]
    kinds: ["Pod"]
    versions: ["v1"]
  location: "spec.containers[name:foo].args"
  parameters:
    operation: merge
    values:
      fromList: ["--verbose"]
`

const modifySetPrune = `
apiVersion: mutations.gatekeeper.sh/VERSION
kind: ModifySet
metadata:
  name: drop-debug
spec:
  applyTo:
  - groups: [""]
    kinds: ["Pod"]
    versions: ["v1"]
  location: "spec.containers[name:foo].args"
  parameters:
    operation: prune
    values:
      fromList: ["--debug"]
`

// No operation: the CRD default ("merge") applies.
const modifySetDefaultOp = `
apiVersion: mutations.gatekeeper.sh/VERSION
kind: ModifySet
metadata:
  name: add-verbose-default-op
spec:
  applyTo:
  - groups: [""]
    kinds: ["Pod"]
    versions: ["v1"]
  location: "spec.containers[name:foo].args"
  parameters:
    values:
      fromList: ["--verbose"]
`

const assignImageDomain = `
apiVersion: mutations.gatekeeper.sh/VERSION
kind: AssignImage
metadata:
  name: registry
spec:
  applyTo:
  - groups: [""]
    kinds: ["Pod"]
    versions: ["v1"]
  location: "spec.containers[name:*].image"
  parameters:
    assignDomain: my.registry.io
`

const assignRunAsNonRootIfMissing = `
apiVersion: mutations.gatekeeper.sh/v1
kind: Assign
metadata:
  name: run-as-nonroot
spec:
  applyTo:
  - groups: [""]
    kinds: ["Pod"]
    versions: ["v1"]
  location: "spec.securityContext.runAsNonRoot"
  parameters:
    pathTests:
    - subPath: "spec.securityContext.runAsNonRoot"
      condition: MustNotExist
    assign:
      value: true
`

// assignIf does not exist in Gatekeeper v3.23.1's API: the API server prunes
// it, so the Assign is unconditional.
const assignWithAssignIf = `
apiVersion: mutations.gatekeeper.sh/v1
kind: Assign
metadata:
  name: dns-none
spec:
  applyTo:
  - groups: [""]
    kinds: ["Pod"]
    versions: ["v1"]
  location: "spec.dnsPolicy"
  parameters:
    assignIf:
      in: ["ClusterFirst"]
    assign:
      value: None
`

const assignSAFromNamespace = `
apiVersion: mutations.gatekeeper.sh/v1
kind: Assign
metadata:
  name: sa-from-ns
spec:
  applyTo:
  - groups: [""]
    kinds: ["Pod"]
    versions: ["v1"]
  location: "spec.serviceAccountName"
  parameters:
    assign:
      fromMetadata:
        field: namespace
`

const assignProdOnly = `
apiVersion: mutations.gatekeeper.sh/v1
kind: Assign
metadata:
  name: prod-priority
spec:
  applyTo:
  - groups: [""]
    kinds: ["Pod"]
    versions: ["v1"]
  match:
    namespaceSelector:
      matchLabels:
        env: prod
  location: "spec.priorityClassName"
  parameters:
    assign:
      value: high
`

const assignMetaNamespaceLabels = `
apiVersion: mutations.gatekeeper.sh/v1
kind: AssignMetadata
metadata:
  name: ns-label
spec:
  match:
    kinds:
    - apiGroups: [""]
      kinds: ["Namespace"]
    namespaceSelector:
      matchLabels:
        env: prod
  location: metadata.labels.tier
  parameters:
    assign:
      value: gold
`

const assignMetaNSFromMetadata = `
apiVersion: mutations.gatekeeper.sh/v1
kind: AssignMetadata
metadata:
  name: ns-of
spec:
  location: metadata.annotations.ns-of
  parameters:
    assign:
      fromMetadata:
        field: namespace
`

// Sorted first (by name) but needs spec.securityContext, which only the
// second one creates: needs two passes.
const assignRunAsUserIfSC = `
apiVersion: mutations.gatekeeper.sh/v1
kind: Assign
metadata:
  name: a-run-as-user
spec:
  applyTo:
  - groups: [""]
    kinds: ["Pod"]
    versions: ["v1"]
  location: "spec.securityContext.runAsUser"
  parameters:
    pathTests:
    - subPath: "spec.securityContext"
      condition: MustExist
    assign:
      value: 1000
`

const assignFSGroup = `
apiVersion: mutations.gatekeeper.sh/v1
kind: Assign
metadata:
  name: b-fs-group
spec:
  applyTo:
  - groups: [""]
    kinds: ["Pod"]
    versions: ["v1"]
  location: "spec.securityContext.fsGroup"
  parameters:
    assign:
      value: 2000
`

// Assign (kind sorts before AssignMetadata) matching a label AssignMetadata adds.
const assignForLabelled = `
apiVersion: mutations.gatekeeper.sh/v1
kind: Assign
metadata:
  name: labelled
spec:
  applyTo:
  - groups: [""]
    kinds: ["Pod"]
    versions: ["v1"]
  match:
    labelSelector:
      matchLabels:
        owner: platform
  location: "spec.schedulerName"
  parameters:
    assign:
      value: platform-scheduler
`

const assignDNSDefault = `
apiVersion: mutations.gatekeeper.sh/v1
kind: Assign
metadata:
  name: x-dns-default
spec:
  applyTo:
  - groups: [""]
    kinds: ["Pod"]
    versions: ["v1"]
  location: "spec.dnsPolicy"
  parameters:
    assign:
      value: Default
`

const assignDNSNone = `
apiVersion: mutations.gatekeeper.sh/v1
kind: Assign
metadata:
  name: y-dns-none
spec:
  applyTo:
  - groups: [""]
    kinds: ["Pod"]
    versions: ["v1"]
  location: "spec.dnsPolicy"
  parameters:
    assign:
      value: None
`

const assignCreateOnly = `
apiVersion: mutations.gatekeeper.sh/v1
kind: Assign
metadata:
  name: create-only
spec:
  applyTo:
  - groups: [""]
    kinds: ["Pod"]
    versions: ["v1"]
    operations: ["CREATE"]
  location: "spec.hostname"
  parameters:
    assign:
      value: created
`

// containers as a keyed list vs containers as an object: schema conflict.
const assignConflictList = `
apiVersion: mutations.gatekeeper.sh/v1
kind: Assign
metadata:
  name: conflict-list
spec:
  applyTo:
  - groups: [""]
    kinds: ["Pod"]
    versions: ["v1"]
  location: "spec.containers[name:*].tty"
  parameters:
    assign:
      value: true
`

const assignConflictObject = `
apiVersion: mutations.gatekeeper.sh/v1
kind: Assign
metadata:
  name: conflict-object
spec:
  applyTo:
  - groups: [""]
    kinds: ["Pod"]
    versions: ["v1"]
  location: "spec.containers.tty"
  parameters:
    assign:
      value: true
`

// ---- objects --------------------------------------------------------------

const podTwoContainers = `
apiVersion: v1
kind: Pod
metadata:
  name: p
  namespace: default
spec:
  containers:
  - name: a
    image: nginx
    imagePullPolicy: IfNotPresent
  - name: b
    image: docker.io/library/busybox:1.36
`

const podTwoContainersAlways = `
apiVersion: v1
kind: Pod
metadata:
  name: p
  namespace: default
spec:
  containers:
  - name: a
    image: nginx
    imagePullPolicy: Always
  - name: b
    image: docker.io/library/busybox:1.36
    imagePullPolicy: Always
`

const podTwoContainersRegistry = `
apiVersion: v1
kind: Pod
metadata:
  name: p
  namespace: default
spec:
  containers:
  - name: a
    image: my.registry.io/nginx
    imagePullPolicy: IfNotPresent
  - name: b
    image: my.registry.io/library/busybox:1.36
`

const podOwnerAlice = `
apiVersion: v1
kind: Pod
metadata:
  name: p
  namespace: default
  labels:
    owner: alice
spec:
  containers:
  - name: a
    image: nginx
`

const podNoLabels = `
apiVersion: v1
kind: Pod
metadata:
  name: p
  namespace: default
spec:
  containers:
  - name: a
    image: nginx
`

const podOwnerPlatform = `
apiVersion: v1
kind: Pod
metadata:
  name: p
  namespace: default
  labels:
    owner: platform
spec:
  containers:
  - name: a
    image: nginx
`

const podArgs = `
apiVersion: v1
kind: Pod
metadata:
  name: p
  namespace: default
spec:
  containers:
  - name: foo
    image: nginx
    args: ["--a", "--debug"]
  - name: bar
    image: nginx
    args: ["--a", "--debug"]
`

const podArgsMerged = `
apiVersion: v1
kind: Pod
metadata:
  name: p
  namespace: default
spec:
  containers:
  - name: foo
    image: nginx
    args: ["--a", "--debug", "--verbose"]
  - name: bar
    image: nginx
    args: ["--a", "--debug"]
`

const podArgsPruned = `
apiVersion: v1
kind: Pod
metadata:
  name: p
  namespace: default
spec:
  containers:
  - name: foo
    image: nginx
    args: ["--a"]
  - name: bar
    image: nginx
    args: ["--a", "--debug"]
`

func pod(ns string, spec string) string {
	s := "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n"
	if ns != "" {
		s += "  namespace: " + ns + "\n"
	}
	return s + "spec:\n" + spec
}

const basicSpec = "  containers:\n  - name: a\n    image: nginx\n"

type admitCase struct {
	name     string
	mutators []string
	config   string
	object   string
	ns       *corev1.Namespace
	op       admissionv1.Operation
	user     string
	want     string // expected stored object; ignored when wantErr != ""
	wantErr  string
}

func runAdmitCases(t *testing.T, cases []admitCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var ms []*unstructured.Unstructured
			for _, m := range tc.mutators {
				ms = append(ms, obj(t, m))
			}
			e, err := New(ms)
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			if tc.config != "" {
				if err := e.SetConfig(obj(t, tc.config)); err != nil {
					t.Fatalf("SetConfig: %v", err)
				}
			}
			in := obj(t, tc.object)
			before := canon(t, in)
			got, err := e.Admit(context.Background(), Request{Object: in, Namespace: tc.ns, Operation: tc.op, UserName: tc.user})
			if canon(t, in) != before {
				t.Errorf("Admit modified its input")
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("want error containing %q, got %v (object %s)", tc.wantErr, err, canon(t, got))
				}
				var ae *AdmissionError
				if !errors.As(err, &ae) || ae.Code != 500 {
					t.Errorf("want *AdmissionError with code 500, got %#v", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Admit: %v", err)
			}
			if g, w := canon(t, got), canon(t, obj(t, tc.want)); g != w {
				t.Errorf("got\n%s\nwant\n%s", g, w)
			}
		})
	}
}

func TestKindsAndVersions(t *testing.T) {
	var cases []admitCase
	defNS := ns("default", nil)
	for _, v := range []string{"v1", "v1beta1", "v1alpha1"} {
		cases = append(cases,
			admitCase{name: "Assign/" + v + "/imagePullPolicy on every container", mutators: []string{withVersion(assignAlwaysPull, v)},
				object: podTwoContainers, ns: defNS, want: podTwoContainersAlways},
			admitCase{name: "AssignMetadata/" + v + "/adds missing label", mutators: []string{withVersion(assignMetaOwner, v)},
				object: podNoLabels, ns: defNS, want: podOwnerPlatform},
			admitCase{name: "AssignMetadata/" + v + "/does not overwrite label", mutators: []string{withVersion(assignMetaOwner, v)},
				object: podOwnerAlice, ns: defNS, want: podOwnerAlice},
			admitCase{name: "ModifySet/" + v + "/merge only into foo", mutators: []string{withVersion(modifySetMerge, v)},
				object: podArgs, ns: defNS, want: podArgsMerged},
			admitCase{name: "ModifySet/" + v + "/merge is default operation", mutators: []string{withVersion(modifySetDefaultOp, v)},
				object: podArgs, ns: defNS, want: podArgsMerged},
			admitCase{name: "ModifySet/" + v + "/prune only from foo", mutators: []string{withVersion(modifySetPrune, v)},
				object: podArgs, ns: defNS, want: podArgsPruned},
		)
	}
	cases = append(cases, admitCase{name: "AssignImage/v1alpha1/assignDomain", mutators: []string{withVersion(assignImageDomain, "v1alpha1")},
		object: podTwoContainers, ns: defNS, want: podTwoContainersRegistry})
	runAdmitCases(t, cases)
}

func TestBehaviour(t *testing.T) {
	prod := ns("prod", map[string]string{"env": "prod"})
	dev := ns("dev", map[string]string{"env": "dev"})
	cases := []admitCase{
		{
			name:     "pathTests MustNotExist keeps existing value",
			mutators: []string{assignRunAsNonRootIfMissing},
			object:   pod("prod", basicSpec+"  securityContext:\n    runAsNonRoot: false\n"), ns: prod,
			want: pod("prod", basicSpec+"  securityContext:\n    runAsNonRoot: false\n"),
		},
		{
			name:     "pathTests MustNotExist sets missing value",
			mutators: []string{assignRunAsNonRootIfMissing},
			object:   pod("prod", basicSpec), ns: prod,
			want: pod("prod", basicSpec+"  securityContext:\n    runAsNonRoot: true\n"),
		},
		{
			name:     "assignIf is pruned by the API server, so the Assign is unconditional",
			mutators: []string{assignWithAssignIf},
			object:   pod("prod", basicSpec+"  dnsPolicy: Default\n"), ns: prod,
			want: pod("prod", basicSpec+"  dnsPolicy: None\n"),
		},
		{
			name:     "fromMetadata namespace",
			mutators: []string{assignSAFromNamespace},
			object:   pod("prod", basicSpec), ns: prod,
			want: pod("prod", basicSpec+"  serviceAccountName: prod\n"),
		},
		{
			name:     "fromMetadata namespace uses the request namespace; metadata.namespace is not added",
			mutators: []string{assignSAFromNamespace},
			object:   pod("", basicSpec), ns: prod,
			want: pod("", basicSpec+"  serviceAccountName: prod\n"),
		},
		{
			name:     "namespaceSelector matches the Request.Namespace labels",
			mutators: []string{assignProdOnly},
			object:   pod("prod", basicSpec), ns: prod,
			want: pod("prod", basicSpec+"  priorityClassName: high\n"),
		},
		{
			name:     "namespaceSelector does not match",
			mutators: []string{assignProdOnly},
			object:   pod("dev", basicSpec), ns: dev,
			want: pod("dev", basicSpec),
		},
		{
			name:     "namespaced object whose Namespace is unknown: webhook errors, request denied",
			mutators: []string{assignProdOnly},
			object:   pod("prod", basicSpec), ns: nil,
			wantErr: `namespaces "prod" not found`,
		},
		{
			name:     "a Namespace is its own namespace for namespaceSelector (Request.Namespace ignored)",
			mutators: []string{assignMetaNamespaceLabels},
			object:   "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: prod\n  labels:\n    env: prod\n", ns: dev,
			want: "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: prod\n  labels:\n    env: prod\n    tier: gold\n",
		},
		{
			name:     "a Namespace not matching its own labels",
			mutators: []string{assignMetaNamespaceLabels},
			object:   "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: dev\n  labels:\n    env: dev\n", ns: prod,
			want: "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: dev\n  labels:\n    env: dev\n",
		},
		{
			name:     "fromMetadata namespace of a Namespace object is empty",
			mutators: []string{assignMetaNSFromMetadata},
			object:   "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: prod\n",
			want:     "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: prod\n  annotations:\n    ns-of: \"\"\n",
		},
		{
			name:     "fromMetadata namespace of a cluster-scoped object is empty",
			mutators: []string{assignMetaNSFromMetadata},
			object:   "apiVersion: v1\nkind: PersistentVolume\nmetadata:\n  name: pv\n",
			want:     "apiVersion: v1\nkind: PersistentVolume\nmetadata:\n  name: pv\n  annotations:\n    ns-of: \"\"\n",
		},
		{
			name:     "two passes: first mutator needs what the second creates",
			mutators: []string{assignFSGroup, assignRunAsUserIfSC},
			object:   pod("prod", basicSpec), ns: prod,
			want: pod("prod", basicSpec+"  securityContext:\n    fsGroup: 2000\n    runAsUser: 1000\n"),
		},
		{
			name:     "two passes: Assign matches a label AssignMetadata adds later in the pass",
			mutators: []string{withVersion(assignMetaOwner, "v1"), assignForLabelled},
			object:   podNoLabels, ns: ns("default", nil),
			want: strings.Replace(podOwnerPlatform, "spec:\n", "spec:\n  schedulerName: platform-scheduler\n", 1),
		},
		{
			name:     "two Assigns to one field converge: the one sorted last wins",
			mutators: []string{assignDNSNone, assignDNSDefault},
			object:   pod("prod", basicSpec), ns: prod,
			want: pod("prod", basicSpec+"  dnsPolicy: None\n"),
		},
		{
			name:     "UPDATE is mutated",
			mutators: []string{withVersion(assignAlwaysPull, "v1")},
			object:   podTwoContainers, ns: ns("default", nil), op: admissionv1.Update,
			want: podTwoContainersAlways,
		},
		{
			name:     "DELETE is never mutated",
			mutators: []string{withVersion(assignAlwaysPull, "v1")},
			object:   podTwoContainers, ns: ns("default", nil), op: admissionv1.Delete,
			want: podTwoContainers,
		},
		{
			name:     "applyTo operations CREATE: applied on CREATE",
			mutators: []string{assignCreateOnly},
			object:   pod("prod", basicSpec), ns: prod, op: admissionv1.Create,
			want: pod("prod", basicSpec+"  hostname: created\n"),
		},
		{
			name:     "applyTo operations CREATE: not applied on UPDATE",
			mutators: []string{assignCreateOnly},
			object:   pod("prod", basicSpec), ns: prod, op: admissionv1.Update,
			want: pod("prod", basicSpec),
		},
		{
			name:     "Gatekeeper's service account is not mutated",
			mutators: []string{withVersion(assignAlwaysPull, "v1")},
			object:   podTwoContainers, ns: ns("default", nil), user: "system:serviceaccount:gatekeeper-system:gatekeeper-admin",
			want: podTwoContainers,
		},
		{
			name:     "Config excludes the namespace from mutation",
			mutators: []string{withVersion(assignAlwaysPull, "v1")},
			config:   "apiVersion: config.gatekeeper.sh/v1alpha1\nkind: Config\nmetadata:\n  name: config\n  namespace: gatekeeper-system\nspec:\n  match:\n  - excludedNamespaces: [\"def*\"]\n    processes: [\"mutation-webhook\"]\n",
			object:   podTwoContainers, ns: ns("default", nil),
			want: podTwoContainers,
		},
		{
			name:     "Config exclusion for another process does not apply",
			mutators: []string{withVersion(assignAlwaysPull, "v1")},
			config:   "apiVersion: config.gatekeeper.sh/v1alpha1\nkind: Config\nmetadata:\n  name: config\n  namespace: gatekeeper-system\nspec:\n  match:\n  - excludedNamespaces: [\"default\"]\n    processes: [\"audit\"]\n",
			object:   podTwoContainers, ns: ns("default", nil),
			want: podTwoContainersAlways,
		},
		{
			// always-pull agrees with conflict-list, but it too disagrees with
			// conflict-object on spec.containers, so all three are skipped.
			name:     "conflicting mutators are skipped, non-overlapping ones still apply",
			mutators: []string{assignConflictList, assignConflictObject, withVersion(assignAlwaysPull, "v1"), assignCreateOnly},
			object:   podTwoContainers, ns: ns("default", nil),
			want: strings.Replace(podTwoContainers, "spec:\n", "spec:\n  hostname: created\n", 1),
		},
	}
	runAdmitCases(t, cases)
}

func TestNumberTypeQuirk(t *testing.T) {
	// Assign values go through types.Anything (encoding/json: numbers become
	// float64) while ModifySet values are decoded by the Kubernetes
	// serializer (integers stay int64). Inside one System.Mutate call the
	// ModifySet therefore does not recognise the 1 set by the Assign and
	// appends another 1. This is Gatekeeper's real behaviour.
	assignList := `
apiVersion: mutations.gatekeeper.sh/v1
kind: Assign
metadata: {name: set-list}
spec:
  applyTo: [{groups: [""], kinds: [Pod], versions: [v1]}]
  location: "spec.nums"
  parameters: {assign: {value: [1]}}
`
	mergeList := `
apiVersion: mutations.gatekeeper.sh/v1
kind: ModifySet
metadata: {name: merge-list}
spec:
  applyTo: [{groups: [""], kinds: [Pod], versions: [v1]}]
  location: "spec.nums"
  parameters: {operation: merge, values: {fromList: [1]}}
`
	runAdmitCases(t, []admitCase{
		{
			name:     "Assign then ModifySet merge of the same integer duplicates it",
			mutators: []string{assignList, mergeList},
			object:   pod("prod", basicSpec), ns: ns("prod", nil),
			want: pod("prod", basicSpec+"  nums: [1, 1]\n"),
		},
		{
			name:     "ModifySet merge of an integer already in the request",
			mutators: []string{mergeList},
			object:   pod("prod", basicSpec+"  nums: [1]\n"), ns: ns("prod", nil),
			want: pod("prod", basicSpec+"  nums: [1]\n"),
		},
	})
}

func TestConflicts(t *testing.T) {
	e, err := New([]*unstructured.Unstructured{
		obj(t, assignConflictObject), obj(t, withVersion(assignAlwaysPull, "v1")), obj(t, assignConflictList),
	})
	if err != nil {
		t.Fatal(err)
	}
	// always-pull shares the keyed-list view of spec.containers with
	// conflict-list, but conflicts with conflict-object: it is marked too.
	want := []string{"Assign/always-pull", "Assign/conflict-list", "Assign/conflict-object"}
	if got := e.Conflicts(); !reflect.DeepEqual(got, want) {
		t.Errorf("Conflicts() = %v, want %v", got, want)
	}
	e, err = New([]*unstructured.Unstructured{obj(t, assignConflictList)})
	if err != nil {
		t.Fatal(err)
	}
	if got := e.Conflicts(); len(got) != 0 {
		t.Errorf("Conflicts() = %v, want none", got)
	}
}

func TestInvalidMutators(t *testing.T) {
	cases := []struct {
		name, mutator, wantErr string
	}{
		{
			name: "Assign location ending in a glob",
			mutator: `
apiVersion: mutations.gatekeeper.sh/v1
kind: Assign
metadata: {name: bad}
spec:
  applyTo: [{groups: [""], kinds: [Pod], versions: [v1]}]
  location: "spec.containers[name:*]"
  parameters: {assign: {value: {name: x}}}
`,
			wantErr: "can't append to a globbed list",
		},
		{
			name: "AssignMetadata on spec",
			mutator: `
apiVersion: mutations.gatekeeper.sh/v1beta1
kind: AssignMetadata
metadata: {name: bad}
spec:
  location: spec.foo
  parameters: {assign: {value: x}}
`,
			wantErr: "invalid location for assignmetadata bad: spec.foo",
		},
		{
			name: "AssignImage tag without : or @",
			mutator: `
apiVersion: mutations.gatekeeper.sh/v1alpha1
kind: AssignImage
metadata: {name: bad}
spec:
  applyTo: [{groups: [""], kinds: [Pod], versions: [v1]}]
  location: "spec.containers[name:*].image"
  parameters: {assignTag: latest}
`,
			wantErr: `assignImage bad has invalid parameters: assignTag "latest" must be a valid docker image tag or digest starting with ':' or '@'`,
		},
		{
			name: "AssignImage has no v1",
			mutator: `
apiVersion: mutations.gatekeeper.sh/v1
kind: AssignImage
metadata: {name: bad}
spec:
  applyTo: [{groups: [""], kinds: [Pod], versions: [v1]}]
  location: "spec.containers[name:*].image"
  parameters: {assignTag: ":latest"}
`,
			wantErr: `no matches for kind "AssignImage" in version "mutations.gatekeeper.sh/v1"`,
		},
		{
			name: "Assign without applyTo",
			mutator: `
apiVersion: mutations.gatekeeper.sh/v1
kind: Assign
metadata: {name: bad}
spec:
  location: "spec.hostname"
  parameters: {assign: {value: x}}
`,
			wantErr: "applyTo required for Assign mutator bad",
		},
		{
			name: "Assign of metadata",
			mutator: `
apiVersion: mutations.gatekeeper.sh/v1
kind: Assign
metadata: {name: bad}
spec:
  applyTo: [{groups: [""], kinds: [Pod], versions: [v1]}]
  location: "metadata.labels.x"
  parameters: {assign: {value: x}}
`,
			wantErr: "assign bad can't change metadata",
		},
		{
			name: "ModifySet operation outside the CRD enum",
			mutator: `
apiVersion: mutations.gatekeeper.sh/v1
kind: ModifySet
metadata: {name: bad}
spec:
  applyTo: [{groups: [""], kinds: [Pod], versions: [v1]}]
  location: "spec.containers[name:foo].args"
  parameters: {operation: replace, values: {fromList: [x]}}
`,
			wantErr: `spec.parameters.operation: Unsupported value: "replace"`,
		},
		{
			name: "Assign externalData is out of scope",
			mutator: `
apiVersion: mutations.gatekeeper.sh/v1
kind: Assign
metadata: {name: bad}
spec:
  applyTo: [{groups: [""], kinds: [Pod], versions: [v1]}]
  location: "spec.containers[name:*].image"
  parameters: {assign: {externalData: {provider: p}}}
`,
			wantErr: "externalData is not supported",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewMutator(obj(t, tc.mutator))
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("NewMutator: want error containing %q, got %v", tc.wantErr, err)
			}
			_, err = New([]*unstructured.Unstructured{obj(t, tc.mutator)})
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "/bad: ") {
				t.Fatalf("New: want error naming the mutator and containing %q, got %v", tc.wantErr, err)
			}
		})
	}
}

func TestDuplicateMutator(t *testing.T) {
	m := obj(t, withVersion(assignAlwaysPull, "v1"))
	if _, err := New([]*unstructured.Unstructured{m, m}); err == nil || !strings.Contains(err.Error(), "Assign/always-pull") {
		t.Fatalf("want duplicate error, got %v", err)
	}
}

// flipMutator is a deliberately non-idempotent mutator (no real Gatekeeper
// mutator can be made to oscillate) used to drive System.Mutate into
// ErrNotConverging and check how the webhook glue reports it.
type flipMutator struct{ name string }

func (f *flipMutator) Matches(*types.Mutable) (bool, error) { return true, nil }
func (f *flipMutator) Mutate(m *types.Mutable) (bool, error) {
	v, _, _ := unstructured.NestedString(m.Object.Object, "spec", "hostname")
	next := "a"
	if v == "a" {
		next = "b"
	}
	return true, unstructured.SetNestedField(m.Object.Object, next, "spec", "hostname")
}
func (f *flipMutator) MustTerminate() bool        { return false }
func (f *flipMutator) ID() types.ID               { return types.ID{Group: Group, Kind: "Flip", Name: f.name} }
func (f *flipMutator) HasDiff(types.Mutator) bool { return true }
func (f *flipMutator) DeepCopy() types.Mutator    { return &flipMutator{name: f.name} }
func (f *flipMutator) Path() parser.Path          { p, _ := parser.Parse("spec.hostname"); return p }
func (f *flipMutator) String() string             { return f.name }

func TestNotConverging(t *testing.T) {
	e, err := newEngine([]types.Mutator{&flipMutator{name: "flip"}}, []string{"Flip/flip"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.Admit(context.Background(), Request{Object: obj(t, pod("prod", basicSpec)), Namespace: ns("prod", nil)})
	if err == nil || !IsNotConverging(err) || !strings.Contains(err.Error(), mutation.ErrNotConverging.Error()) {
		t.Fatalf("want not-converging denial, got %v", err)
	}
}

func TestMutationErrorDenies(t *testing.T) {
	// Assigning into an object field that is a string is a mutation error
	// inside Gatekeeper; the webhook answers Errored and the request is denied.
	m := `
apiVersion: mutations.gatekeeper.sh/v1
kind: Assign
metadata: {name: into-string}
spec:
  applyTo: [{groups: [""], kinds: [Pod], versions: [v1]}]
  location: "spec.hostname.x"
  parameters: {assign: {value: y}}
`
	e, err := New([]*unstructured.Unstructured{obj(t, m)})
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.Admit(context.Background(), Request{Object: obj(t, pod("prod", basicSpec+"  hostname: h\n")), Namespace: ns("prod", nil)})
	var ae *AdmissionError
	if !errors.As(err, &ae) || !strings.Contains(ae.Message, "mutator") {
		t.Fatalf("want mutation error denial, got %v", err)
	}
}
