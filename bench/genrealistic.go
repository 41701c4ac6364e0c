package bench

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
)

// GenerateRealistic writes n Gatekeeper mutators as one YAML stream, drawn with seed from the
// families a platform team runs (those of realistic-100), with their parameters varied:
//
//   - labels and annotations (AssignMetadata) of Pods and of Deployments, StatefulSets and
//     DaemonSets, some from the namespace;
//   - Pod defaults with MustNotExist path tests (security context, service account token,
//     service links, grace period, a DNS option), node selector keys, tolerations, image pull
//     secrets, topology spread, scratch volumes, and merges into one list (supplemental groups);
//   - container and init container defaults (security context, pull policy, requests,
//     termination message), environment variables (plain, defaults, or from the downward API),
//     merges and prunes of capabilities, prunes of arguments, defaults of containers by name;
//   - the platform's registry rewrites (for Pods, for Deployments and StatefulSets, and a second
//     registry for DaemonSets) and its tag pins of the proxies it ships (AssignImage);
//   - a sidecar or init container injected whole every hundredth mutator (at most three the
//     platform's, the others teams'), after which the container mutators whose matches meet its
//     run again on the injected container;
//   - the same defaults on the Pod templates of Deployments, StatefulSets and DaemonSets,
//     merges into their tolerations, and Deployment and DaemonSet settings.
//
// Each mutator either applies to the whole platform (every namespace but the system ones, or
// those labelled env=prod or env=staging, or Pods with an app or logging=enabled label, or the
// shop namespaces) or to one team's namespace (team-0, team-1, …; about 25 mutators per team).
// Platform-wide mutators are at most 70 % of them and about 200 in all, however large n: a
// cluster with thousands of mutators has them because it has many teams. Names, label keys,
// environment variables and toleration keys carry the mutator's index, so that they are
// distinct, and no two mutators compete for one place (see claim). The same n and seed give the
// same stream. At the sizes TestGenerateRealistic checks, Gatekeeper converges on every bench
// object and both layouts compile every mutator.
func GenerateRealistic(n int, seed int64) []byte {
	g := &realGen{r: rand.New(rand.NewPCG(uint64(seed), 0x6d617063)), n: n, used: map[string]string{}}
	var b strings.Builder
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteString("---\n")
		}
		g.mutator(&b, i)
	}
	return []byte(b.String())
}

type realGen struct {
	r    *rand.Rand
	n    int
	used map[string]string // see claim
	// platformSidecars counts the sidecars the platform injects.
	platformSidecars int
}

// target is the resource kinds a mutator applies to and where their Pod spec is.
type target struct {
	group   string
	kinds   []string
	podSpec string // "spec" or "spec.template.spec"
}

var podTarget = target{"", []string{"Pod"}, "spec"}

// workloadTarget draws the workload kinds of a Pod template mutator.
func (g *realGen) workloadTarget() target {
	kinds := [][]string{{"Deployment", "StatefulSet", "DaemonSet"}, {"Deployment", "StatefulSet"}, {"Deployment"}, {"StatefulSet"}, {"DaemonSet"}}
	return target{"apps", kinds[g.r.IntN(len(kinds))], "spec.template.spec"}
}

// doc is one mutator being written.
type doc struct {
	kind, version, name string
	t                   target
	applyTo             bool // AssignMetadata has none
	scope               scope
	location            string
	params              string // the parameters block, each line indented by four spaces
}

func (d doc) write(b *strings.Builder) {
	fmt.Fprintf(b, "apiVersion: mutations.gatekeeper.sh/%s\nkind: %s\nmetadata:\n  name: %s\nspec:\n", d.version, d.kind, d.name)
	kinds := strings.Join(d.t.kinds, ", ")
	if d.applyTo {
		fmt.Fprintf(b, "  applyTo:\n  - groups: [%q]\n    kinds: [%s]\n    versions: [v1]\n", d.t.group, kinds)
	}
	fmt.Fprintf(b, "  match:\n    scope: Namespaced\n    kinds:\n    - apiGroups: [%q]\n      kinds: [%s]\n", d.t.group, kinds)
	b.WriteString("    excludedNamespaces: [\"kube-system\", \"kube-public\", \"gatekeeper-system\"]\n")
	b.WriteString(d.scope.match)
	fmt.Fprintf(b, "  location: %s\n  parameters:\n%s", quoteLocation(d.location), d.params)
}

// quoteLocation writes a location as a single-quoted YAML string.
func quoteLocation(l string) string { return "'" + strings.ReplaceAll(l, "'", "''") + "'" }

// js writes v as JSON, which YAML reads as a flow value.
func js(v any) string {
	data, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(data)
}

func assign(v any, tests ...string) string {
	s := "    assign:\n      value: " + js(v) + "\n"
	return s + pathTests(tests...)
}

// pathTests writes pathTests: each test is "MustExist:path" or "MustNotExist:path".
func pathTests(tests ...string) string {
	if len(tests) == 0 {
		return ""
	}
	s := "    pathTests:\n"
	for _, t := range tests {
		cond, path, _ := strings.Cut(t, ":")
		s += fmt.Sprintf("    - subPath: %s\n      condition: %s\n", quoteLocation(path), cond)
	}
	return s
}

func modifySet(op string, values ...any) string {
	return fmt.Sprintf("    operation: %s\n    values:\n      fromList: %s\n", op, js(values))
}

// scope is where a mutator applies: its match clauses beyond kinds and the system namespaces,
// and who owns it ("platform", or the team's namespace).
type scope struct{ match, owner string }

// scope draws where a mutator applies: platform-wide (at most 70 % of the mutators, about 200
// in all) or one team's namespace.
func (g *realGen) scope() scope {
	if g.r.Float64() < min(0.7, 200/float64(max(g.n, 1))) {
		var m string
		switch g.r.IntN(10) {
		case 0, 1, 2, 3, 4:
		case 5, 6:
			m = fmt.Sprintf("    namespaceSelector:\n      matchLabels:\n        env: %s\n", []string{"prod", "staging"}[g.r.IntN(2)])
		case 7:
			m = "    labelSelector:\n      matchExpressions:\n      - key: app\n        operator: Exists\n"
		case 8:
			m = "    labelSelector:\n      matchLabels:\n        logging: enabled\n"
		default:
			m = "    namespaces: [\"shop\", \"shop-*\"]\n"
		}
		return scope{m, "platform"}
	}
	return g.teamScope()
}

// teamScope draws one team's namespace, and for a quarter of the mutators a tier of its Pods.
func (g *realGen) teamScope() scope {
	team := fmt.Sprintf("team-%d", g.team())
	m := fmt.Sprintf("    namespaces: [%q]\n", team)
	if g.r.IntN(4) == 0 {
		m += fmt.Sprintf("    labelSelector:\n      matchLabels:\n        tier: t%d\n", g.r.IntN(3))
	}
	return scope{m, team}
}

// claim reports whether sc's owner may write slot (a location whose value is not merged, such
// as a default or a prune), and marks it written. The platform and the teams split the slots:
// the platform takes one no one has, a team one the platform and that team do not have (teams'
// namespaces are distinct, so teams never meet). No two mutators then compete for one place on
// one Pod, which Gatekeeper would settle by their names: a platform team that lets teams set
// their own defaults leaves those fields alone.
func (g *realGen) claim(sc scope, slot string) bool {
	if g.used[slot] == "platform" || g.used[sc.owner+" "+slot] != "" {
		return false
	}
	if sc.owner == "platform" && g.used[slot] != "" {
		return false
	}
	g.used[slot] = g.used[slot] + "|" + sc.owner
	if sc.owner == "platform" {
		g.used[slot] = "platform"
	}
	g.used[sc.owner+" "+slot] = "taken"
	return true
}

// team draws a team: about 25 mutators each.
func (g *realGen) team() int { return g.r.IntN(max(4, g.n/25)) }

func (g *realGen) pick(s []string) string { return s[g.r.IntN(len(s))] }

var (
	labelDomains = []string{"platform.example.com", "team.example.com", "cost.example.com", "security.example.com", "app.kubernetes.io"}
	labelWords   = []string{"owner", "tier", "component", "cost-center", "data-class", "compliance", "budget", "oncall", "region", "part-of"}
	annoDomains  = []string{"platform.example.com", "prometheus.io", "backup.velero.io", "fluentbit.io", "reloader.stakater.com", "karpenter.sh"}
	envWords     = []string{"REGION", "CLUSTER", "FEATURE", "ENDPOINT", "LOG_LEVEL", "TRACE_SAMPLER", "CACHE_URL", "QUEUE", "DEPLOY_ENV", "TENANT"}
	fieldPaths   = []string{"metadata.name", "metadata.namespace", "spec.nodeName", "spec.serviceAccountName", "status.podIP", "status.hostIP"}
	namedCtrs    = []string{"app", "nginx", "envoy", "worker", "sql-proxy", "cache"}
	pinned       = []string{"envoy", "sql-proxy"}
	sidecarKinds = []string{"log-shipper", "mesh-proxy", "vault-agent", "metrics-agent", "config-reloader"}
	images       = []string{"fluent/fluent-bit:3.0", "envoyproxy/envoy:v1.31.2", "hashicorp/vault:1.17", "otel/opentelemetry-collector:0.98.0", "ghcr.io/example/reloader:2.1"}
	prunedArgs   = []string{"--debug", "--verbose", "-v", "--insecure", "--profiling"}
	prunedCaps   = []string{"NET_RAW", "SYS_ADMIN", "NET_ADMIN", "SYS_PTRACE", "SYS_MODULE"}
)

// containers draws the containers (or init containers) of a Pod spec.
func (g *realGen) containers(podSpec string) string {
	if g.r.IntN(5) == 0 {
		return podSpec + ".initContainers[name: *]"
	}
	return podSpec + ".containers[name: *]"
}

// podDefault is a Pod-level default: a location and its value, with a MustNotExist test on
// the location (or on test, when given).
type podDefault struct {
	location, test string
	value          func(g *realGen, i int) any
}

var podDefaults = []podDefault{
	{"securityContext.runAsNonRoot", "", func(*realGen, int) any { return true }},
	{"securityContext.runAsUser", "", func(g *realGen, _ int) any { return 1000 + g.r.IntN(9000) }},
	{"securityContext.runAsGroup", "", func(g *realGen, _ int) any { return 1000 + g.r.IntN(9000) }},
	{"securityContext.fsGroup", "", func(g *realGen, _ int) any { return 1000 + g.r.IntN(9000) }},
	{"securityContext.fsGroupChangePolicy", "", func(*realGen, int) any { return "OnRootMismatch" }},
	{"securityContext.seccompProfile.type", "securityContext.seccompProfile", func(*realGen, int) any { return "RuntimeDefault" }},
	{"automountServiceAccountToken", "", func(*realGen, int) any { return false }},
	{"enableServiceLinks", "", func(*realGen, int) any { return false }},
	{"terminationGracePeriodSeconds", "", func(g *realGen, _ int) any { return 10 * (1 + g.r.IntN(12)) }},
	{"dnsConfig.options[name: ndots].value", "dnsConfig.options[name: ndots]", func(g *realGen, _ int) any { return fmt.Sprint(1 + g.r.IntN(4)) }},
}

// tested is the location of the default's MustNotExist test.
func (d podDefault) tested() string {
	if d.test != "" {
		return d.test
	}
	return d.location
}

// containerDefaults are container-level defaults, as podDefaults.
var containerDefaults = []podDefault{
	{"securityContext.allowPrivilegeEscalation", "", func(*realGen, int) any { return false }},
	{"securityContext.readOnlyRootFilesystem", "", func(*realGen, int) any { return true }},
	{"securityContext.runAsNonRoot", "", func(*realGen, int) any { return true }},
	{"securityContext.seccompProfile.type", "securityContext.seccompProfile", func(*realGen, int) any { return "RuntimeDefault" }},
	{"imagePullPolicy", "", func(g *realGen, _ int) any { return g.pick([]string{"IfNotPresent", "Always"}) }},
	{"resources.requests.cpu", "", func(g *realGen, _ int) any { return fmt.Sprintf("%dm", 10*(1+g.r.IntN(50))) }},
	{"resources.requests.memory", "", func(g *realGen, _ int) any {
		return g.pick([]string{"64Mi", "128Mi", "192Mi", "256Mi", "384Mi", "512Mi", "768Mi"})
	}},
	{`resources.requests."ephemeral-storage"`, "", func(g *realGen, _ int) any { return g.pick([]string{"128Mi", "256Mi", "512Mi", "768Mi"}) }},
	{"terminationMessagePolicy", "", func(*realGen, int) any { return "FallbackToLogsOnError" }},
}

// namedDefaults are defaults of a container by name, on fields no wildcard default writes.
var namedDefaults = []podDefault{
	{"lifecycle.preStop", "", func(g *realGen, _ int) any {
		return map[string]any{"exec": map[string]any{"command": []any{"sleep", fmt.Sprint(1 + g.r.IntN(10))}}}
	}},
	{"securityContext.runAsUser", "", func(g *realGen, _ int) any { return 1000 + g.r.IntN(9000) }},
	{"securityContext.runAsGroup", "", func(g *realGen, _ int) any { return 1000 + g.r.IntN(9000) }},
}

// family writes one kind of mutator for index i; false when its owner already wrote what it
// drew (see claim): the family draws again, and after three tries the mutator is a label.
type family struct {
	weight int
	write  func(g *realGen, i int) (doc, bool)
}

var families = []family{
	// Pod labels (the fallback of every family) and annotations.
	{8, func(g *realGen, i int) (doc, bool) { return g.label(i), true }},
	{8, func(g *realGen, i int) (doc, bool) {
		return doc{kind: "AssignMetadata", version: "v1", name: fmt.Sprintf("annotation-%05d", i), t: podTarget, scope: g.scope(),
			location: fmt.Sprintf("metadata.annotations.%q", fmt.Sprintf("%s/%s-%d", g.pick(annoDomains), g.pick(labelWords), i)),
			params:   assign(g.pick([]string{"true", "false", "json", "/metrics", "9090", "team@example.com"}))}, true
	}},
	// Pod defaults, node selectors, tolerations, pull secrets, topology spread, volumes, merges.
	{10, func(g *realGen, i int) (doc, bool) { return g.podDefault(i, podTarget) }},
	{2, func(g *realGen, i int) (doc, bool) { return g.nodeSelector(i, podTarget), true }},
	{4, func(g *realGen, i int) (doc, bool) {
		key := fmt.Sprintf("%s/%s-%d", g.pick([]string{"dedicated.example.com", "node.example.com", "cloud.example.com"}), g.pick(labelWords), i)
		tol := map[string]any{"key": key, "operator": "Exists", "effect": "NoSchedule"}
		if g.r.IntN(3) == 0 {
			tol = map[string]any{"key": key, "operator": "Equal", "value": "true", "effect": "NoExecute", "tolerationSeconds": 60 * (1 + g.r.IntN(10))}
		}
		return doc{kind: "Assign", version: "v1", name: fmt.Sprintf("pod-toleration-%05d", i), t: podTarget, applyTo: true, scope: g.scope(),
			location: fmt.Sprintf("spec.tolerations[key: %q]", key), params: assign(tol)}, true
	}},
	{2, func(g *realGen, i int) (doc, bool) {
		sc, name := g.scope(), fmt.Sprintf("regcred-%d", g.r.IntN(max(4, g.n/50)))
		return doc{kind: "Assign", version: "v1", name: fmt.Sprintf("pod-pull-secret-%05d", i), t: podTarget, applyTo: true, scope: sc,
			location: fmt.Sprintf("spec.imagePullSecrets[name: %s]", name), params: assign(map[string]any{"name": name})}, g.claim(sc, "pull secret "+name)
	}},
	{2, func(g *realGen, i int) (doc, bool) {
		sc, key := g.scope(), g.pick([]string{"topology.kubernetes.io/zone", "kubernetes.io/hostname"})
		loc := fmt.Sprintf("spec.topologySpreadConstraints[topologyKey: %q]", key)
		return doc{kind: "Assign", version: "v1", name: fmt.Sprintf("pod-spread-%05d", i), t: podTarget, applyTo: true, scope: sc, location: loc,
			params: assign(map[string]any{"topologyKey": key, "maxSkew": 1 + g.r.IntN(2), "whenUnsatisfiable": "ScheduleAnyway",
				"labelSelector": map[string]any{"matchExpressions": []any{map[string]any{"key": "app", "operator": "Exists"}}}}, "MustNotExist:"+loc)}, g.claim(sc, loc)
	}},
	{1, func(g *realGen, i int) (doc, bool) {
		name := fmt.Sprintf("scratch-%d", i)
		loc := fmt.Sprintf("spec.volumes[name: %s]", name)
		return doc{kind: "Assign", version: "v1", name: fmt.Sprintf("pod-volume-%05d", i), t: podTarget, applyTo: true, scope: g.scope(), location: loc,
			params: assign(map[string]any{"name": name, "emptyDir": map[string]any{"sizeLimit": "1Gi"}}, "MustNotExist:"+loc)}, true
	}},
	{2, func(g *realGen, i int) (doc, bool) {
		return doc{kind: "ModifySet", version: "v1", name: fmt.Sprintf("pod-supplemental-groups-%05d", i), t: podTarget, applyTo: true, scope: g.scope(),
			location: "spec.securityContext.supplementalGroups", params: modifySet("merge", 3000+g.r.IntN(100))}, true
	}},
	// Containers: defaults, environment (the fallback of every family), capabilities,
	// arguments, defaults of containers by name, images.
	{12, func(g *realGen, i int) (doc, bool) { return g.containerDefault(i, podTarget) }},
	{8, func(g *realGen, i int) (doc, bool) { return g.env(i), true }},
	{3, func(g *realGen, i int) (doc, bool) {
		sc, ctrs := g.scope(), g.containers("spec")
		d := doc{kind: "ModifySet", version: "v1", name: fmt.Sprintf("container-caps-%05d", i), t: podTarget, applyTo: true, scope: sc}
		if g.r.IntN(2) == 0 {
			d.location, d.params = ctrs+".securityContext.capabilities.drop", modifySet("merge", "ALL")
			return d, g.claim(sc, d.location)
		}
		d.location, d.params = ctrs+".securityContext.capabilities.add", modifySet("prune", g.pick(prunedCaps), g.pick(prunedCaps))
		return d, g.claim(sc, d.location)
	}},
	{2, func(g *realGen, i int) (doc, bool) {
		sc := g.scope()
		d := doc{kind: "ModifySet", version: "v1", name: fmt.Sprintf("container-prune-args-%05d", i), t: podTarget, applyTo: true, scope: sc,
			location: "spec.containers[name: *].args", params: modifySet("prune", g.pick(prunedArgs), g.pick(prunedArgs))}
		return d, g.claim(sc, d.location)
	}},
	{2, func(g *realGen, i int) (doc, bool) {
		sc := g.scope()
		c := fmt.Sprintf("spec.containers[name: %s]", g.pick(namedCtrs))
		def := namedDefaults[g.r.IntN(len(namedDefaults))]
		loc := c + "." + def.location
		return doc{kind: "Assign", version: "v1", name: fmt.Sprintf("container-named-%05d", i), t: podTarget, applyTo: true, scope: sc,
			location: loc, params: assign(def.value(g, i), "MustExist:"+c, "MustNotExist:"+c+"."+def.tested())}, g.claim(sc, loc)
	}},
	{3, func(g *realGen, i int) (doc, bool) { return g.podImage(i) }},
	// Pod templates of Deployments, StatefulSets and DaemonSets, and the workloads themselves.
	{3, func(g *realGen, i int) (doc, bool) {
		return doc{kind: "Assign", version: "v1", name: fmt.Sprintf("template-label-%05d", i), t: g.workloadTarget(), applyTo: true, scope: g.scope(),
			location: fmt.Sprintf("spec.template.metadata.labels.%q", fmt.Sprintf("%s/%s-%d", g.pick(labelDomains), g.pick(labelWords), i)),
			params:   assign(fmt.Sprintf("v%d", g.r.IntN(100)))}, true
	}},
	{4, func(g *realGen, i int) (doc, bool) {
		if g.r.IntN(5) == 0 {
			return g.nodeSelector(i, g.workloadTarget()), true
		}
		return g.podDefault(i, g.workloadTarget())
	}},
	{4, func(g *realGen, i int) (doc, bool) { return g.containerDefault(i, g.workloadTarget()) }},
	{1, func(g *realGen, i int) (doc, bool) {
		// The platform's registry for Deployments and StatefulSets, and a second one for
		// DaemonSets (node agents pull before the cluster network is up).
		t, domain := target{"apps", []string{"Deployment", "StatefulSet"}, "spec.template.spec"}, "registry.example.com"
		if g.r.IntN(2) == 0 {
			t, domain = target{"apps", []string{"DaemonSet"}, "spec.template.spec"}, "infra.registry.example.com"
		}
		sc := scope{owner: "platform"}
		return doc{kind: "AssignImage", version: "v1alpha1", name: fmt.Sprintf("template-registry-%05d", i), t: t, applyTo: true, scope: sc,
			location: "spec.template.spec.containers[name: *].image", params: fmt.Sprintf("    assignDomain: %s\n", domain)}, g.claim(sc, "registry "+domain)
	}},
	{1, func(g *realGen, i int) (doc, bool) {
		tol := map[string]any{"key": fmt.Sprintf("dedicated.example.com/%s-%d", g.pick(labelWords), i), "operator": "Exists", "effect": "NoSchedule"}
		return doc{kind: "ModifySet", version: "v1", name: fmt.Sprintf("template-toleration-%05d", i), t: g.workloadTarget(), applyTo: true, scope: g.scope(),
			location: "spec.template.spec.tolerations", params: modifySet("merge", tol)}, true
	}},
	{1, func(g *realGen, i int) (doc, bool) {
		sc := g.scope()
		if g.r.IntN(2) == 0 {
			return doc{kind: "Assign", version: "v1", name: fmt.Sprintf("deployment-history-%05d", i), t: target{"apps", []string{"Deployment"}, "spec.template.spec"},
				applyTo: true, scope: sc, location: "spec.revisionHistoryLimit", params: assign(1+g.r.IntN(10), "MustNotExist:spec.revisionHistoryLimit")}, g.claim(sc, "revisionHistoryLimit")
		}
		return doc{kind: "Assign", version: "v1", name: fmt.Sprintf("daemonset-max-unavailable-%05d", i), t: target{"apps", []string{"DaemonSet"}, "spec.template.spec"},
			applyTo: true, scope: sc, location: "spec.updateStrategy.rollingUpdate.maxUnavailable", params: assign(fmt.Sprintf("%d%%", 5*(1+g.r.IntN(6))))}, g.claim(sc, "maxUnavailable")
	}},
	{2, func(g *realGen, i int) (doc, bool) {
		return doc{kind: "AssignMetadata", version: "v1", name: fmt.Sprintf("workload-label-%05d", i), t: g.workloadTarget(), scope: g.scope(),
			location: fmt.Sprintf("metadata.labels.%q", fmt.Sprintf("%s/%s-%d", g.pick(labelDomains), g.pick(labelWords), i)),
			params:   assign(fmt.Sprintf("v%d", g.r.IntN(100)))}, true
	}},
}

var familyWeight = func() int {
	w := 0
	for _, f := range families {
		w += f.weight
	}
	return w
}()

func (g *realGen) mutator(b *strings.Builder, i int) {
	if i%100 == 50 {
		g.sidecar(i).write(b)
		return
	}
	k := g.r.IntN(familyWeight)
	for _, f := range families {
		if k < f.weight {
			// A family whose owner already wrote what it drew draws again, twice.
			for try := 0; try < 3; try++ {
				if d, ok := f.write(g, i); ok {
					d.write(b)
					return
				}
			}
			g.label(i).write(b)
			return
		}
		k -= f.weight
	}
}

// label is a Pod label, some from the namespace. Its key carries i, so it is always distinct.
func (g *realGen) label(i int) doc {
	d := doc{kind: "AssignMetadata", version: "v1", name: fmt.Sprintf("label-%05d", i), t: podTarget, scope: g.scope(),
		location: fmt.Sprintf("metadata.labels.%q", fmt.Sprintf("%s/%s-%d", g.pick(labelDomains), g.pick(labelWords), i))}
	if g.r.IntN(8) == 0 {
		d.params = "    assign:\n      fromMetadata:\n        field: namespace\n"
	} else {
		d.params = assign(fmt.Sprintf("v%d", g.r.IntN(100)))
	}
	return d
}

// slotOf names what a Pod spec default writes, for claim: Pods and Pod templates apart.
func slotOf(t target, loc string) string { return t.group + " " + loc }

func (g *realGen) podDefault(i int, t target) (doc, bool) {
	sc, def := g.scope(), podDefaults[g.r.IntN(len(podDefaults))]
	loc := t.podSpec + "." + def.location
	return doc{kind: "Assign", version: "v1", name: fmt.Sprintf("pod-default-%05d", i), t: t, applyTo: true, scope: sc,
		location: loc, params: assign(def.value(g, i), "MustNotExist:"+t.podSpec+"."+def.tested())}, g.claim(sc, slotOf(t, loc))
}

func (g *realGen) nodeSelector(i int, t target) doc {
	key := fmt.Sprintf("node.example.com/%s-%d", g.pick(labelWords), i)
	return doc{kind: "Assign", version: "v1", name: fmt.Sprintf("node-selector-%05d", i), t: t, applyTo: true, scope: g.scope(),
		location: fmt.Sprintf("%s.nodeSelector.%q", t.podSpec, key), params: assign(g.pick([]string{"true", "general", "on-demand"}))}
}

func (g *realGen) containerDefault(i int, t target) (doc, bool) {
	sc, ctrs, def := g.scope(), g.containers(t.podSpec), containerDefaults[g.r.IntN(len(containerDefaults))]
	loc := ctrs + "." + def.location
	return doc{kind: "Assign", version: "v1", name: fmt.Sprintf("container-default-%05d", i), t: t, applyTo: true, scope: sc,
		location: loc, params: assign(def.value(g, i), "MustNotExist:"+ctrs+"."+def.tested())}, g.claim(sc, slotOf(t, loc))
}

// env is an environment variable of every container (or init container): a value, a default
// value, or a default from the downward API. Its name carries i, so it is always distinct.
func (g *realGen) env(i int) doc {
	ctrs := g.containers("spec")
	name := fmt.Sprintf("%s_%d", g.pick(envWords), i)
	d := doc{kind: "Assign", version: "v1", name: fmt.Sprintf("container-env-%05d", i), t: podTarget, applyTo: true, scope: g.scope()}
	elem := fmt.Sprintf("%s.env[name: %s]", ctrs, name)
	switch g.r.IntN(3) {
	case 0:
		d.location, d.params = elem+".value", assign(fmt.Sprintf("value-%d", g.r.IntN(1000)))
	case 1:
		d.location, d.params = elem+".value", assign(fmt.Sprintf("value-%d", g.r.IntN(1000)), "MustNotExist:"+elem)
	default:
		d.location, d.params = elem, assign(map[string]any{"name": name, "valueFrom": map[string]any{"fieldRef": map[string]any{"apiVersion": "v1", "fieldPath": g.pick(fieldPaths)}}}, "MustNotExist:"+elem)
	}
	return d
}

// podImage is the platform's registry rewrite of Pod containers or init containers, or its
// tag pin of a proxy it ships (a container by name). Teams rewrite no image: the platform's
// rewrites apply to every namespace, and one per place (see claim).
func (g *realGen) podImage(i int) (doc, bool) {
	sc := scope{owner: "platform"}
	d := doc{kind: "AssignImage", version: "v1alpha1", name: fmt.Sprintf("image-%05d", i), t: podTarget, applyTo: true, scope: sc}
	if g.r.IntN(2) == 0 {
		d.location, d.params = g.containers("spec")+".image", "    assignDomain: registry.example.com\n"
		return d, g.claim(sc, d.location)
	}
	c := fmt.Sprintf("spec.containers[name: %s]", g.pick(pinned))
	d.location = c + ".image"
	d.params = fmt.Sprintf("    assignTag: \":%d.%d.%d\"\n", 1+g.r.IntN(3), g.r.IntN(20), g.r.IntN(10)) + pathTests("MustExist:"+c)
	return d, g.claim(sc, d.location)
}

// sidecar injects a container or an init container whole. The platform runs at most three
// (a mesh, a log shipper, a secrets agent: every container mutator whose match meets theirs
// runs again on their container); the others are teams'.
func (g *realGen) sidecar(i int) doc {
	sc := g.scope()
	if sc.owner == "platform" {
		if g.platformSidecars == 3 {
			sc = g.teamScope()
		} else {
			g.platformSidecars++
		}
	}
	k := g.r.IntN(len(sidecarKinds))
	name := fmt.Sprintf("%s-%d", sidecarKinds[k], i)
	ctr := map[string]any{
		"name": name, "image": images[k], "imagePullPolicy": "IfNotPresent",
		"terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "FallbackToLogsOnError",
		"args":            []any{fmt.Sprintf("--instance=%d", i)},
		"resources":       map[string]any{"requests": map[string]any{"cpu": "20m", "memory": "32Mi"}, "limits": map[string]any{"memory": "32Mi"}},
		"securityContext": map[string]any{"capabilities": map[string]any{"drop": []any{"ALL"}}},
	}
	list := "containers"
	if g.r.IntN(3) == 0 {
		list = "initContainers"
		ctr["name"] = name + "-init"
		ctr["securityContext"] = map[string]any{"capabilities": map[string]any{"add": []any{"NET_ADMIN"}, "drop": []any{"ALL"}}}
	}
	loc := fmt.Sprintf("spec.%s[name: %s]", list, ctr["name"])
	return doc{kind: "Assign", version: "v1", name: fmt.Sprintf("sidecar-%05d", i), t: podTarget, applyTo: true, scope: sc,
		location: loc, params: assign(ctr, "MustNotExist:"+loc)}
}
