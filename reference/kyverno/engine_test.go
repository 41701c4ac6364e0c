package kyverno

import (
	"context"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// policy is a ClusterPolicy (or, with namespace, a Policy) with the given spec, in YAML.
func policy(name, namespace, spec string) string {
	kind, ns := "ClusterPolicy", ""
	if namespace != "" {
		kind, ns = "Policy", "\n  namespace: "+namespace
	}
	return "apiVersion: kyverno.io/v1\nkind: " + kind + "\nmetadata:\n  name: " + name + ns + "\nspec:\n" + indent(spec, "  ")
}

func indent(s, by string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = by + l
	}
	return strings.Join(lines, "\n") + "\n"
}

// labelRule is a mutate rule on Pods setting label key=value by patchStrategicMerge.
func labelRule(name, key, value string) string {
	return `- name: ` + name + `
  match:
    any:
    - resources:
        kinds: [Pod]
  mutate:
    patchStrategicMerge:
      metadata:
        labels:
          ` + key + `: ` + value + `
`
}

// failingRule is a mutate rule on Pods whose variable cannot be resolved.
const failingRule = `- name: broken
  match:
    any:
    - resources:
        kinds: [Pod]
  mutate:
    patchStrategicMerge:
      metadata:
        labels:
          owner: "{{ request.object.metadata.annotations.missing }}"
`

const pod = `apiVersion: v1
kind: Pod
metadata:
  name: web
  namespace: default
  labels:
    app: web
spec:
  containers:
  - name: app
    image: nginx
`

// debugged is the pod with an ephemeral container, as kubectl debug adds one.
const debugged = pod + `  ephemeralContainers:
  - name: debugger
    image: busybox
`

func obj(t *testing.T, y string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(y), &u.Object); err != nil {
		t.Fatalf("%v\n%s", err, y)
	}
	return u
}

// edit is the pod with changes made by f, for wanted results.
func edit(t *testing.T, y string, f func(o map[string]any)) *unstructured.Unstructured {
	u := obj(t, y)
	f(u.Object)
	return u
}

func labels(o map[string]any) map[string]any {
	md := o["metadata"].(map[string]any)
	if md["labels"] == nil {
		md["labels"] = map[string]any{}
	}
	return md["labels"].(map[string]any)
}

// contextTeam is a policy labelling Pods with the team value gives, read from the context
// entry written as entry (YAML, one list item).
func contextTeam(name, entry, value string) string {
	return policy(name, "", `rules:
- name: team
  match:
    any:
    - resources:
        kinds: [Pod]
  context:
`+indent(entry, "  ")+`  mutate:
    patchStrategicMerge:
      metadata:
        labels:
          team: "`+value+`"
`)
}

// teamsRule labels Pods with the team a configMap context entry reads from the ConfigMap
// default/teams.
var teamsRule = contextTeam("team", "- name: cm\n  configMap:\n    name: teams\n", "{{ cm.data.team }}")

func TestAdmit(t *testing.T) {
	deployment := `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: default
spec:
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: app
        image: nginx
`
	// A policy whose apiCall entry reads the request's namespace's team label.
	namespaceTeam := contextTeam("ns", `- name: team
  apiCall:
    urlPath: "/api/v1/namespaces/{{request.namespace}}"
    jmesPath: metadata.labels.team
`, "{{ team }}")
	tests := []struct {
		name      string
		policies  []string
		config    map[string]string
		cms       []string // ConfigMaps in the cluster
		object    string
		old       string
		op        admissionv1.Operation
		sub       string // the request's subresource
		namespace *corev1.Namespace
		order     []string
		want      *unstructured.Unstructured // nil: the object unchanged
		denied    string                     // a part of Kyverno's denial
	}{{
		name:      "an apiCall reads the request's namespace",
		policies:  []string{namespaceTeam},
		object:    pod,
		namespace: &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default", Labels: map[string]string{"team": "payments"}}},
		want:      edit(t, pod, func(o map[string]any) { labels(o)["team"] = "payments" }),
	}, {
		name:     "an apiCall whose jmesPath finds nothing in the namespace fails the rule",
		policies: []string{namespaceTeam},
		object:   pod,
		denied:   "failed to apply JMESPath",
	}, {
		name:     "a label added by patchStrategicMerge",
		policies: []string{policy("team", "", "rules:\n"+labelRule("team", "team", "payments"))},
		object:   pod,
		want:     edit(t, pod, func(o map[string]any) { labels(o)["team"] = "payments" }),
	}, {
		name: "a new container is prepended",
		policies: []string{policy("sidecar", "", `rules:
- name: sidecar
  match:
    any:
    - resources:
        kinds: [Pod]
  mutate:
    patchStrategicMerge:
      spec:
        containers:
        - name: proxy
          image: envoy
`)},
		object: pod,
		want: edit(t, pod, func(o map[string]any) {
			spec := o["spec"].(map[string]any)
			spec["containers"] = append([]any{map[string]any{"name": "proxy", "image": "envoy"}}, spec["containers"].([]any)...)
		}),
	}, {
		name: "a conditional anchor that does not hold skips the rule",
		policies: []string{policy("db", "", `rules:
- name: db
  match:
    any:
    - resources:
        kinds: [Pod]
  mutate:
    patchStrategicMerge:
      metadata:
        labels:
          (app): db
          tier: data
`)},
		object: pod,
	}, {
		name: "a conditional anchor that holds",
		policies: []string{policy("web", "", `rules:
- name: web
  match:
    any:
    - resources:
        kinds: [Pod]
  mutate:
    patchStrategicMerge:
      metadata:
        labels:
          (app): web
          tier: front
`)},
		object: pod,
		want:   edit(t, pod, func(o map[string]any) { labels(o)["tier"] = "front" }),
	}, {
		name: "patchesJson6902 creates missing parents",
		policies: []string{policy("note", "", `rules:
- name: note
  match:
    any:
    - resources:
        kinds: [Pod]
  mutate:
    patchesJson6902: |-
      - op: add
        path: /metadata/annotations/note
        value: hello
`)},
		object: pod,
		want: edit(t, pod, func(o map[string]any) {
			o["metadata"].(map[string]any)["annotations"] = map[string]any{"note": "hello"}
		}),
	}, {
		name:     "two policies: the later one wins",
		policies: []string{policy("a", "", "rules:\n"+labelRule("a", "team", "a")), policy("b", "", "rules:\n"+labelRule("b", "team", "b"))},
		object:   pod,
		want:     edit(t, pod, func(o map[string]any) { labels(o)["team"] = "b" }),
	}, {
		name:     "two policies in the other order",
		policies: []string{policy("a", "", "rules:\n"+labelRule("a", "team", "a")), policy("b", "", "rules:\n"+labelRule("b", "team", "b"))},
		order:    []string{"b", "a"},
		object:   pod,
		want:     edit(t, pod, func(o map[string]any) { labels(o)["team"] = "a" }),
	}, {
		// Kyverno's mutate handler gives an empty resource for a rule that fails, and the
		// mutation handler hands the policy's patched resource to the next policy: after a
		// failing policy under Ignore, the later policies of the same webhook call match nothing.
		name: "a failing rule under Ignore drops its policy's patches, and the policies after it see an empty resource",
		policies: []string{
			policy("broken", "", "failurePolicy: Ignore\nrules:\n"+labelRule("team", "team", "payments")+failingRule),
			policy("after", "", "failurePolicy: Ignore\nrules:\n"+labelRule("after", "after", "done")),
		},
		object: pod,
	}, {
		name: "a failing policy under Ignore after another one",
		policies: []string{
			policy("broken", "", "failurePolicy: Ignore\nrules:\n"+labelRule("team", "team", "payments")+failingRule),
			policy("after", "", "failurePolicy: Ignore\nrules:\n"+labelRule("after", "after", "done")),
		},
		order:  []string{"after", "broken"},
		object: pod,
		want:   edit(t, pod, func(o map[string]any) { labels(o)["after"] = "done" }),
	}, {
		name:     "a failing rule under Fail denies",
		policies: []string{policy("broken", "", "failurePolicy: Fail\nrules:\n"+labelRule("team", "team", "payments")+failingRule)},
		object:   pod,
		denied:   `admission webhook "mutate.kyverno.svc-fail" denied the request: mutation policy broken error: failed to apply policy broken rules [broken:`,
	}, {
		name: "Fail policies run before Ignore ones, whatever the order",
		policies: []string{
			policy("ignore", "", "failurePolicy: Ignore\nrules:\n"+labelRule("team", "team", "ignore")),
			policy("fail", "", "failurePolicy: Fail\nrules:\n"+labelRule("team", "team", "fail")),
		},
		order:  []string{"ignore", "fail"},
		object: pod,
		want:   edit(t, pod, func(o map[string]any) { labels(o)["team"] = "ignore" }),
	}, {
		name:     "autogen rules mutate a Deployment's pod template",
		policies: []string{policy("team", "", "rules:\n"+labelRule("team", "team", "payments"))},
		object:   deployment,
		want: edit(t, deployment, func(o map[string]any) {
			labels(o["spec"].(map[string]any)["template"].(map[string]any))["team"] = "payments"
		}),
	}, {
		name:     "a namespaced Policy applies in its namespace",
		policies: []string{policy("team", "default", "rules:\n"+labelRule("team", "team", "payments"))},
		object:   pod,
		want:     edit(t, pod, func(o map[string]any) { labels(o)["team"] = "payments" }),
	}, {
		name:     "a namespaced Policy does not apply in another namespace",
		policies: []string{policy("team", "other", "rules:\n"+labelRule("team", "team", "payments"))},
		object:   pod,
	}, {
		name: "namespaceSelector reads the namespace's labels",
		policies: []string{policy("prod", "", `rules:
- name: prod
  match:
    any:
    - resources:
        kinds: [Pod]
        namespaceSelector:
          matchLabels: {env: prod}
  mutate:
    patchStrategicMerge:
      metadata:
        labels:
          env: prod
`)},
		object:    pod,
		namespace: &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default", Labels: map[string]string{"env": "prod"}}},
		want:      edit(t, pod, func(o map[string]any) { labels(o)["env"] = "prod" }),
	}, {
		name: "namespaceSelector on a namespace without the label",
		policies: []string{policy("prod", "", `rules:
- name: prod
  match:
    any:
    - resources:
        kinds: [Pod]
        namespaceSelector:
          matchLabels: {env: prod}
  mutate:
    patchStrategicMerge:
      metadata:
        labels:
          env: prod
`)},
		object: pod,
	}, {
		name: "UPDATE sees the old object",
		policies: []string{policy("previous", "", `rules:
- name: previous
  match:
    any:
    - resources:
        kinds: [Pod]
        operations: [UPDATE]
  mutate:
    patchStrategicMerge:
      metadata:
        annotations:
          previous: "{{ request.oldObject.metadata.labels.app }}"
`)},
		object: pod,
		old:    strings.Replace(pod, "app: web", "app: old", 1),
		op:     admissionv1.Update,
		want: edit(t, pod, func(o map[string]any) {
			o["metadata"].(map[string]any)["annotations"] = map[string]any{"previous": "old"}
		}),
	}, {
		name:     "CREATE-only rules do not apply to UPDATE",
		policies: []string{policy("create", "", "rules:\n"+strings.Replace(labelRule("c", "team", "payments"), "kinds: [Pod]", "kinds: [Pod]\n        operations: [CREATE]", 1))},
		object:   pod,
		old:      pod,
		op:       admissionv1.Update,
	}, {
		name:     "Pod rules run on pods/ephemeralcontainers (kubectl debug)",
		policies: []string{policy("team", "", "rules:\n"+labelRule("team", "team", "payments"))},
		object:   debugged,
		old:      pod,
		op:       admissionv1.Update,
		sub:      "ephemeralcontainers",
		want:     edit(t, debugged, func(o map[string]any) { labels(o)["team"] = "payments" }),
	}, {
		name:     "rules for other kinds do not run on pods/ephemeralcontainers",
		policies: []string{policy("team", "", "rules:\n"+strings.Replace(labelRule("team", "team", "payments"), "kinds: [Pod]", "kinds: [Deployment]", 1))},
		object:   debugged,
		old:      pod,
		op:       admissionv1.Update,
		sub:      "ephemeralcontainers",
	}, {
		name:     "Pod rules do not run on pods/status",
		policies: []string{policy("team", "", "rules:\n"+labelRule("team", "team", "payments"))},
		object:   pod,
		old:      pod,
		op:       admissionv1.Update,
		sub:      "status",
	}, {
		name:     "DELETE is not mutated",
		policies: []string{policy("team", "", "rules:\n"+labelRule("team", "team", "payments"))},
		object:   pod,
		old:      pod,
		op:       admissionv1.Delete,
	}, {
		name:     "a resource filter of Kyverno's configuration skips the request",
		policies: []string{policy("team", "", "rules:\n"+labelRule("team", "team", "payments"))},
		config:   map[string]string{"resourceFilters": "[Pod,default,*]"},
		object:   pod,
	}, {
		name:     "the namespaceSelector of Kyverno's configuration leaves a namespace out",
		policies: []string{policy("team", "", "rules:\n"+labelRule("team", "team", "payments"))},
		config:   map[string]string{"webhooks": `{"namespaceSelector":{"matchExpressions":[{"key":"kubernetes.io/metadata.name","operator":"NotIn","values":["default"]}]}}`},
		object:   pod,
	}, {
		name:      "the namespaceSelector of Kyverno's configuration selects a namespace",
		policies:  []string{policy("team", "", "rules:\n"+labelRule("team", "team", "payments"))},
		config:    map[string]string{"webhooks": `{"namespaceSelector":{"matchLabels":{"env":"prod"}}}`},
		namespace: &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default", Labels: map[string]string{"env": "prod"}}},
		object:    pod,
		want:      edit(t, pod, func(o map[string]any) { labels(o)["team"] = "payments" }),
	}, {
		name:     "the objectSelector of Kyverno's configuration leaves an object out",
		policies: []string{policy("team", "", "rules:\n"+labelRule("team", "team", "payments"))},
		config:   map[string]string{"webhooks": `{"objectSelector":{"matchLabels":{"mutate":"yes"}}}`},
		object:   pod,
	}, {
		name:     "a match condition of Kyverno's configuration that does not hold skips its webhooks",
		policies: []string{policy("team", "", "rules:\n"+labelRule("team", "team", "payments"))},
		config:   map[string]string{"matchConditions": `[{"name":"named-api","expression":"object.metadata.name == 'api'"}]`},
		object:   pod,
	}, {
		name:     "a match condition of Kyverno's configuration that holds",
		policies: []string{policy("team", "", "rules:\n"+labelRule("team", "team", "payments"))},
		config:   map[string]string{"matchConditions": `[{"name":"named","expression":"object.metadata.name != ''"}]`},
		object:   pod,
		want:     edit(t, pod, func(o map[string]any) { labels(o)["team"] = "payments" }),
	}, {
		name:     "a match condition of Kyverno's configuration that fails denies under Fail",
		policies: []string{policy("team", "", "rules:\n"+labelRule("team", "team", "payments"))},
		config:   map[string]string{"matchConditions": `[{"name":"owner","expression":"object.metadata.annotations.owner == 'x'"}]`},
		object:   pod,
		denied:   "failed to evaluate match conditions",
	}, {
		name:     "a match condition of Kyverno's configuration is not evaluated for kinds no policy has",
		policies: []string{policy("team", "", "rules:\n"+labelRule("team", "team", "payments"))},
		config:   map[string]string{"matchConditions": `[{"name":"owner","expression":"object.metadata.annotations.owner == 'x'"}]`},
		object:   "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n  namespace: default\n",
	}, {
		name:     "a Policy with match conditions of its own, in its namespace",
		policies: []string{policy("team", "default", "webhookConfiguration:\n  matchConditions:\n  - name: owned\n    expression: object.metadata.annotations.owner == 'x'\nrules:\n"+labelRule("team", "team", "payments"))},
		object:   strings.Replace(pod, "  labels:\n", "  annotations:\n    owner: x\n  labels:\n", 1),
		want: edit(t, strings.Replace(pod, "  labels:\n", "  annotations:\n    owner: x\n  labels:\n", 1), func(o map[string]any) {
			labels(o)["team"] = "payments"
		}),
	}, {
		name:      "a Policy's own webhook is called in every namespace, and its conditions evaluated",
		policies:  []string{policy("team", "default", "webhookConfiguration:\n  matchConditions:\n  - name: owned\n    expression: object.metadata.annotations.owner == 'x'\nrules:\n"+labelRule("team", "team", "payments"))},
		object:    strings.Replace(pod, "namespace: default", "namespace: shop", 1),
		namespace: &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}},
		denied:    `failed calling webhook "mutate.kyverno.svc-fail-finegrained-default-team": failed to evaluate match conditions`,
	}, {
		name:      "a Policy with match conditions mutates only in its namespace",
		policies:  []string{policy("team", "default", "webhookConfiguration:\n  matchConditions:\n  - name: any\n    expression: \"true\"\nrules:\n"+labelRule("team", "team", "payments"))},
		object:    strings.Replace(pod, "namespace: default", "namespace: shop", 1),
		namespace: &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}},
	}, {
		name:     "excludeGroups of Kyverno's configuration skips the request",
		policies: []string{policy("team", "", "rules:\n"+labelRule("team", "team", "payments"))},
		config:   map[string]string{"excludeGroups": "system:authenticated"},
		object:   pod,
	}, {
		name:     "a configMap context entry reads the ConfigMap given (in default when none is named)",
		policies: []string{teamsRule},
		cms:      []string{"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: teams\ndata:\n  team: payments\n"},
		object:   pod,
		want:     edit(t, pod, func(o map[string]any) { labels(o)["team"] = "payments" }),
	}, {
		name:     "a missing ConfigMap fails the rule that reads it",
		policies: []string{teamsRule},
		cms:      []string{"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: teams\n  namespace: platform\ndata:\n  team: payments\n"},
		object:   pod,
		denied:   `failed to get configmap default/teams`,
	}, {
		name: "match conditions of its own that hold: its webhook runs the policy",
		policies: []string{policy("team", "", "webhookConfiguration:\n  matchConditions:\n  - name: web\n    expression: object.metadata.name == 'web'\nrules:\n"+labelRule("team", "team", "payments")),
			policy("tier", "", "rules:\n"+labelRule("tier", "tier", "front"))},
		object: pod,
		want:   edit(t, pod, func(o map[string]any) { labels(o)["team"] = "payments"; labels(o)["tier"] = "front" }),
	}, {
		name: "match conditions of its own that do not hold: only the other policies run",
		policies: []string{policy("team", "", "webhookConfiguration:\n  matchConditions:\n  - name: web\n    expression: object.metadata.name == 'api'\nrules:\n"+labelRule("team", "team", "payments")),
			policy("tier", "", "rules:\n"+labelRule("tier", "tier", "front"))},
		object: pod,
		want:   edit(t, pod, func(o map[string]any) { labels(o)["tier"] = "front" }),
	}, {
		name:     "match conditions that fail, under Fail: the request is denied",
		policies: []string{policy("team", "", "webhookConfiguration:\n  matchConditions:\n  - name: annotated\n    expression: object.metadata.annotations.owner == 'x'\nrules:\n"+labelRule("team", "team", "payments"))},
		object:   pod,
		denied:   "failed to evaluate match conditions",
	}, {
		name:     "match conditions that fail, under Ignore: the webhook is skipped",
		policies: []string{policy("team", "", "failurePolicy: Ignore\nwebhookConfiguration:\n  matchConditions:\n  - name: annotated\n    expression: object.metadata.annotations.owner == 'x'\nrules:\n"+labelRule("team", "team", "payments"))},
		object:   pod,
	}, {
		name:     "match conditions that would fail are not evaluated for a resource the policy has no rule for",
		policies: []string{policy("team", "", "webhookConfiguration:\n  matchConditions:\n  - name: annotated\n    expression: object.metadata.annotations.owner == 'x'\nrules:\n"+labelRule("team", "team", "payments"))},
		object:   "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n  namespace: default\n",
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var policies []*unstructured.Unstructured
			for _, p := range tc.policies {
				policies = append(policies, obj(t, p))
			}
			var cms []*unstructured.Unstructured
			for _, c := range tc.cms {
				cms = append(cms, obj(t, c))
			}
			e, err := New(Setup{Policies: policies, Config: tc.config, ConfigMaps: cms})
			if err != nil {
				t.Fatal(err)
			}
			req := Request{Object: obj(t, tc.object), Operation: tc.op, SubResource: tc.sub, Namespace: tc.namespace, Order: tc.order}
			if tc.old != "" {
				req.OldObject = obj(t, tc.old)
			}
			got := e.Admit(context.Background(), req)
			if got.Error != "" {
				t.Fatalf("error: %s", got.Error)
			}
			if tc.denied != "" {
				if !strings.Contains(got.Denied, tc.denied) {
					t.Fatalf("denied = %q, want it to contain %q (object %v)", got.Denied, tc.denied, got.Object)
				}
				return
			}
			if got.Denied != "" {
				t.Fatalf("denied: %s", got.Denied)
			}
			want := tc.want
			if want == nil {
				want = req.Object
			}
			if !apiequality.Semantic.DeepEqual(got.Object.Object, want.Object) {
				g, _ := yaml.Marshal(got.Object.Object)
				w, _ := yaml.Marshal(want.Object)
				t.Errorf("got\n%s\nwant\n%s", g, w)
			}
		})
	}
}

func TestNewRefuses(t *testing.T) {
	tests := []struct{ name, policy, want string }{
		{"not a policy", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n", "v1 ConfigMap is not a Kyverno policy"},
		{"a Policy without a namespace", "apiVersion: kyverno.io/v1\nkind: Policy\nmetadata:\n  name: x\nspec: {}\n", "Policy/x has no namespace"},
		{"an unknown field", policy("x", "", "rulez: []\n"), "rulez"},
		{"match conditions that do not compile", policy("x", "", "webhookConfiguration:\n  matchConditions:\n  - name: a\n    expression: 'object.metadata.name + 1'\nrules:\n"+labelRule("a", "b", "c")), "spec.webhookConfiguration.matchConditions"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(Setup{Policies: []*unstructured.Unstructured{obj(t, tc.policy)}})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
}
