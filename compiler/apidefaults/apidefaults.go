// Package apidefaults is the API server's defaulting of built-in kinds as it matters to
// mutations: writing a field may make the API server fill others right after the mutation
// (k8s.io/apiserver's MutatingAdmissionPolicy dispatcher defaults the object after every
// patch), where a webhook's engine sees none of them until its result is stored. The defaulting
// functions live in k8s.io/kubernetes (pkg/apis/core/v1/defaults.go), which this project does
// not import; the rules restate, conservatively, the ones that fill a field from another or
// fill fields of a node a mutation may create. Defaults of fields that every admitted object
// already has (a Pod's dnsPolicy, a Deployment's strategy) matter only when a mutation replaces
// their whole parent, which the node rules cover for the Pod spec.
package apidefaults

import (
	"fmt"
	"slices"
)

// AnyField is a field name matching every object field (a ResourceList's keys, a label).
const AnyField = "\x00*"

// Seg is a step of a path: a field, or a list's items (Item), keyed on the field Key.
type Seg struct {
	Field string
	Item  bool
	Key   string
}

// Path is a place in an object.
type Path []Seg

// Rule: writing at (or above) Source — or, with Below, also beneath it — may make the API server
// fill the Derived fields. Paths are relative to a pod spec unless Absolute.
type Rule struct {
	Source   Path
	Below    bool
	Derived  []Path
	PodOnly  bool     // only for Pods (pod templates are not defaulted this way)
	Kinds    []string // "group/Kind" the rule is for when absolute
	Absolute bool
	Why      string
}

func fs(name string) Seg { return Seg{Field: name} }

var (
	anyKey     = Seg{Field: AnyField}
	anyElement = Seg{Item: true, Key: "name"}
)

func ph(segs ...Seg) Path { return segs }

// containerRules are the defaults of one container list.
func containerRules(list string) []Rule {
	c := ph(fs(list), anyElement)
	at := func(rest ...Seg) Path { return append(append(Path(nil), c...), rest...) }
	var probes []Path
	var probeRules []Rule
	for _, pr := range []string{"livenessProbe", "readinessProbe", "startupProbe"} {
		for _, fld := range []string{"timeoutSeconds", "periodSeconds", "successThreshold", "failureThreshold"} {
			probes = append(probes, at(fs(pr), fs(fld)))
		}
		for _, fld := range []string{"Path", "scheme", "protocol"} {
			probes = append(probes, at(fs(pr), fs("httpGet"), fs(fld)))
		}
		probeRules = append(probeRules, Rule{Source: at(fs(pr)), Derived: probes[len(probes)-7:],
			Why: fmt.Sprintf("the API server fills a new %s's timeouts, thresholds and httpGet scheme, Path and protocol", pr)})
	}
	var hooks []Path
	for _, h := range []string{"postStart", "preStop"} {
		hooks = append(hooks, at(fs("lifecycle"), fs(h), fs("httpGet"), fs("Path")), at(fs("lifecycle"), fs(h), fs("httpGet"), fs("scheme")), at(fs("lifecycle"), fs(h), fs("httpGet"), fs("protocol")))
	}
	ports := []Path{at(fs("ports"), Seg{Item: true, Key: "containerPort"}, fs("protocol")), at(fs("ports"), Seg{Item: true, Key: "containerPort"}, fs("hostPort"))}
	fieldRef := at(fs("env"), anyElement, fs("valueFrom"), fs("fieldRef"), fs("apiVersion"))
	node := append([]Path{at(fs("imagePullPolicy")), at(fs("terminationMessagePath")), at(fs("terminationMessagePolicy")), fieldRef}, probes...)
	node = append(append(node, hooks...), ports...)
	rules := []Rule{
		{Source: c, Derived: node, Why: "the API server fills a new container's imagePullPolicy, terminationMessagePath and -Policy, port protocols, probe settings and fieldRef apiVersions"},
		{Source: at(fs("ports")), Derived: ports, Why: "the API server fills a new port's protocol (and hostPort on the host network)"},
		{Source: at(fs("env")), Derived: []Path{fieldRef}, Why: "the API server fills a new fieldRef's apiVersion"},
		{Source: at(fs("lifecycle")), Derived: hooks, Why: "the API server fills a new lifecycle hook's httpGet scheme, Path and protocol"},
		{Source: at(fs("resources"), fs("limits")), Below: true, PodOnly: true,
			Derived: []Path{at(fs("resources"), fs("requests")), at(fs("resources"), fs("requests"), anyKey)},
			Why:     "the API server copies a Pod container's limits to its missing requests"},
	}
	return append(rules, probeRules...)
}

// PodSpecRules are the defaults of a pod spec, with paths below it.
var PodSpecRules = func() []Rule {
	var rules []Rule
	for _, l := range []string{"containers", "initContainers", "ephemeralContainers"} {
		rules = append(rules, containerRules(l)...)
	}
	vol := ph(fs("volumes"), anyElement)
	at := func(rest ...Seg) Path { return append(append(Path(nil), vol...), rest...) }
	modes := []Path{at(fs("secret"), fs("defaultMode")), at(fs("configMap"), fs("defaultMode")), at(fs("downwardAPI"), fs("defaultMode")), at(fs("projected"), fs("defaultMode")),
		at(fs("hostPath"), fs("type")), at(fs("emptyDir")), at(fs("projected"), fs("sources"), Seg{Item: true, Key: "name"}, fs("serviceAccountToken"), fs("expirationSeconds")),
		at(fs("image"), fs("pullPolicy"))}
	rules = append(rules,
		Rule{Source: vol, Derived: modes, Why: "the API server fills a new volume's source defaults (defaultMode, hostPath type, emptyDir)"},
		Rule{Source: ph(fs("serviceAccountName")), Below: true, Derived: []Path{ph(fs("serviceAccount"))}, Why: "the API server copies serviceAccountName to serviceAccount"},
		Rule{Source: ph(fs("serviceAccount")), Below: true, Derived: []Path{ph(fs("serviceAccountName"))}, Why: "the API server copies serviceAccount to a missing serviceAccountName"},
		Rule{Source: ph(fs("hostNetwork")), Below: true, Derived: []Path{
			ph(fs("containers"), anyElement, fs("ports"), Seg{Item: true, Key: "containerPort"}, fs("hostPort")),
			ph(fs("initContainers"), anyElement, fs("ports"), Seg{Item: true, Key: "containerPort"}, fs("hostPort")),
		}, Why: "on the host network the API server copies container ports to missing host ports"},
		Rule{Source: ph(fs("resources")), Below: true, PodOnly: true, Derived: []Path{ph(fs("resources"), fs("requests"), anyKey), ph(fs("resources"), fs("limits"), anyKey), ph(fs("resources"), fs("requests")), ph(fs("resources"), fs("limits"))},
			Why: "the API server derives a Pod's pod-level requests and limits from its pod-level and container resources"},
	)
	// Container resources feed the pod-level ones as well.
	for _, l := range []string{"containers", "initContainers"} {
		rules = append(rules, Rule{Source: ph(fs(l), anyElement, fs("resources")), Below: true, PodOnly: true,
			Derived: []Path{ph(fs("resources"), fs("requests"), anyKey), ph(fs("resources"), fs("limits"), anyKey)},
			Why:     "the API server derives a Pod's pod-level requests and limits from its containers' resources"})
	}
	// The pod spec itself, and its securityContext, always exist once an object is admitted (a
	// Pod's spec and a template's spec are structs the API server defaults on decoding), so the
	// spec-level defaults (dnsPolicy, restartPolicy, ...) never appear between mutations.
	return rules
}()

// AbsoluteRules are defaults of other kinds that derive one field from another.
var AbsoluteRules = []Rule{
	{Absolute: true, Kinds: []string{"/ReplicationController"}, Source: ph(fs("spec"), fs("template"), fs("metadata"), fs("labels")), Below: true,
		Derived: []Path{ph(fs("metadata"), fs("labels"), anyKey), ph(fs("spec"), fs("selector"), anyKey)},
		Why:     "the API server copies a ReplicationController's template labels to its missing labels and selector"},
	{Absolute: true, Kinds: []string{"/Service"}, Source: ph(fs("spec"), fs("ports"), Seg{Item: true, Key: "port"}),
		Derived: []Path{ph(fs("spec"), fs("ports"), Seg{Item: true, Key: "port"}, fs("protocol")), ph(fs("spec"), fs("ports"), Seg{Item: true, Key: "port"}, fs("targetPort"))},
		Why:     "the API server fills a new Service port's protocol and targetPort"},
}

// PodSpecRoots: where each kind holds a pod spec.
var PodSpecRoots = map[string]Path{
	"/Pod":                   ph(fs("spec")),
	"/PodTemplate":           ph(fs("template"), fs("spec")),
	"/ReplicationController": ph(fs("spec"), fs("template"), fs("spec")),
	"apps/Deployment":        ph(fs("spec"), fs("template"), fs("spec")),
	"apps/ReplicaSet":        ph(fs("spec"), fs("template"), fs("spec")),
	"apps/StatefulSet":       ph(fs("spec"), fs("template"), fs("spec")),
	"apps/DaemonSet":         ph(fs("spec"), fs("template"), fs("spec")),
	"batch/Job":              ph(fs("spec"), fs("template"), fs("spec")),
	"batch/CronJob":          ph(fs("spec"), fs("jobTemplate"), fs("spec"), fs("template"), fs("spec")),
}

// Defaulted is a field the API server may fill after a mutation, as the chain of field names
// down to it (AnyField for a list's items: the chain stands for the field in every item), and
// why.
type Defaulted struct {
	Fields []string
	Why    string
	// Only, when set, is the one key the filled map can hold (a container's requests made
	// from its limits, one key of which was written).
	Only string
}

// After lists the fields the API server may fill in an object of the kind ("group/Kind") right
// after a mutation that writes at w, a chain of field names with AnyField for list items. Every
// item of a list stands for all of them, so the answer is conservative.
func After(kind string, w []string) []Defaulted {
	var out []Defaulted
	try := func(r Rule, root Path) {
		src := Chain(slices.Concat(root, r.Source))
		if !Prefix(w, src) && !(r.Below && Prefix(src, w)) {
			return
		}
		for _, d := range r.Derived {
			f := Chain(slices.Concat(root, d))
			// Keys copied from the source map to its sibling (a container's limits to its
			// requests): where one key of the source is written, that key only, and a
			// sibling the default creates holds only it (had the source held others before,
			// the sibling would have been made then).
			only := ""
			if n := len(src); r.Below && len(w) > n && Prefix(src[:n-1], f) {
				switch {
				case len(f) == n+1 && f[n] == AnyField:
					f[n] = w[n]
				case len(f) == n && f[n-1] != src[n-1]:
					only = w[n]
				}
			}
			out = append(out, Defaulted{Fields: f, Why: r.Why, Only: only})
		}
	}
	if root, ok := PodSpecRoots[kind]; ok {
		for _, r := range PodSpecRules {
			if !r.PodOnly || kind == "/Pod" {
				try(r, root)
			}
		}
	}
	for _, r := range AbsoluteRules {
		if slices.Contains(r.Kinds, kind) {
			try(r, nil)
		}
	}
	return out
}

// Chain is the path's field names, AnyField for a list's items.
func Chain(p Path) []string {
	var out []string
	for _, s := range p {
		if s.Item {
			out = append(out, AnyField)
		} else {
			out = append(out, s.Field)
		}
	}
	return out
}

// Prefix: is the chain a a prefix of b (AnyField matching any name)?
func Prefix(a, b []string) bool {
	if len(a) > len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] && a[i] != AnyField && b[i] != AnyField {
			return false
		}
	}
	return true
}

// String is the chain as a dotted path (AnyField as *).
func String(chain []string) string {
	out := ""
	for i, f := range chain {
		if f == AnyField {
			f = "*"
		}
		if i > 0 {
			out += "."
		}
		out += f
	}
	return out
}
