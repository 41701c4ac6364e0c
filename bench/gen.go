package bench

import (
	"fmt"
	"strings"
)

type genKind struct {
	group, kind string
	podSpec     string // path of the pod spec in the object
	template    string // path of the pod template's metadata ("" for a Pod)
}

var genKinds = []genKind{
	{"apps", "Deployment", "spec.template.spec", "spec.template.metadata"},
	{"apps", "StatefulSet", "spec.template.spec", "spec.template.metadata"},
	{"apps", "DaemonSet", "spec.template.spec", "spec.template.metadata"},
	{"apps", "ReplicaSet", "spec.template.spec", "spec.template.metadata"},
	{"batch", "Job", "spec.template.spec", "spec.template.metadata"},
	{"", "ReplicationController", "spec.template.spec", "spec.template.metadata"},
	{"", "Pod", "spec", ""},
}

// Generate writes n distinct Gatekeeper mutators as one YAML stream, for compile throughput: a
// mix of the four kinds, of seven resource kinds and of locations (labels, annotations, env
// variables, args, images, security contexts, node selectors of containers named after the
// mutator, so that nearly all are independent), some with namespace and label matches. One in a
// hundred adds a toleration: those interact (both append to one list) and are grouped with the
// others of their resource kind.
func Generate(n int) []byte {
	var b strings.Builder
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteString("---\n")
		}
		k := genKinds[(i/10)%len(genKinds)]
		c := fmt.Sprintf("%s.containers[name: c%d]", k.podSpec, i)
		mustExist := fmt.Sprintf("    pathTests:\n    - subPath: '%s'\n      condition: MustExist\n", c)
		var match string
		switch i % 7 {
		case 0:
			match = fmt.Sprintf("    namespaces: [\"team-%d\", \"shared-*\"]\n", i%20)
		case 1:
			match = "    excludedNamespaces: [kube-system]\n"
		case 2:
			match = fmt.Sprintf("    labelSelector:\n      matchLabels:\n        tier: t%d\n", i%5)
		}
		group := k.group
		match = fmt.Sprintf("  match:\n    scope: Namespaced\n    kinds:\n    - apiGroups: [%q]\n      kinds: [%s]\n", group, k.kind) + match
		applyTo := fmt.Sprintf("  applyTo:\n  - groups: [%q]\n    kinds: [%s]\n    versions: [v1]\n", group, k.kind)
		head := func(kind, version string) {
			fmt.Fprintf(&b, "apiVersion: mutations.gatekeeper.sh/%s\nkind: %s\nmetadata:\n  name: gen-%05d\nspec:\n", version, kind, i)
		}
		switch {
		case i%100 == 8:
			head("Assign", "v1")
			fmt.Fprintf(&b, "%s%s  location: '%s.tolerations[key: \"gen.example.com/t%d\"]'\n  parameters:\n    assign:\n      value: {key: \"gen.example.com/t%d\", operator: Exists}\n",
				applyTo, match, k.podSpec, i, i)
		case i%10 == 0 || i%10 == 1:
			head("AssignMetadata", "v1")
			fmt.Fprintf(&b, "%s  location: 'metadata.labels.\"gen.example.com/l%d\"'\n  parameters:\n    assign:\n      value: \"v%d\"\n", match, i, i)
		case i%10 == 2:
			head("AssignMetadata", "v1")
			fmt.Fprintf(&b, "%s  location: 'metadata.annotations.\"gen.example.com/a%d\"'\n  parameters:\n    assign:\n      value: \"v%d\"\n", match, i, i)
		case i%10 == 3 || i%10 == 4:
			head("Assign", "v1")
			fmt.Fprintf(&b, "%s%s  location: '%s.env[name: E%d].value'\n  parameters:\n    assign:\n      value: \"v%d\"\n%s", applyTo, match, c, i, i, mustExist)
		case i%10 == 5 && k.template != "":
			head("Assign", "v1")
			fmt.Fprintf(&b, "%s%s  location: '%s.annotations.\"gen.example.com/a%d\"'\n  parameters:\n    assign:\n      value: \"v%d\"\n", applyTo, match, k.template, i, i)
		case i%10 == 5:
			head("Assign", "v1")
			fmt.Fprintf(&b, "%s%s  location: '%s.nodeSelector.\"gen.example.com/n%d\"'\n  parameters:\n    assign:\n      value: \"v%d\"\n", applyTo, match, k.podSpec, i, i)
		case i%10 == 6:
			head("ModifySet", "v1")
			fmt.Fprintf(&b, "%s%s  location: '%s.args'\n  parameters:\n    operation: merge\n    values:\n      fromList: [\"--flag-%d\"]\n%s", applyTo, match, c, i, mustExist)
		case i%10 == 7:
			head("AssignImage", "v1alpha1")
			fmt.Fprintf(&b, "%s%s  location: '%s.image'\n  parameters:\n    assignTag: \":v%d\"\n%s", applyTo, match, c, i, mustExist)
		case i%10 == 8:
			head("Assign", "v1")
			fmt.Fprintf(&b, "%s%s  location: '%s.resources.limits.cpu'\n  parameters:\n    assign:\n      value: \"%dm\"\n%s", applyTo, match, c, 100+i, mustExist)
		default:
			head("Assign", "v1")
			fmt.Fprintf(&b, "%s%s  location: '%s.securityContext.runAsUser'\n  parameters:\n    assign:\n      value: %d\n%s", applyTo, match, c, 1000+i, mustExist)
		}
	}
	return []byte(b.String())
}

// GenerateMerges writes n ModifySet merges of one distinct toleration each into the tolerations
// of Pods, as one YAML stream; with mixed, every third applies only in one namespace and every
// third only to Pods with a label, the others to every Pod. Merges into one list only add
// values: they need one round, and are computed in one expression (see TestMergesIntoOneList).
func GenerateMerges(n int, mixed bool) []byte {
	var b strings.Builder
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteString("---\n")
		}
		match := ""
		if mixed && i%3 == 1 {
			match = fmt.Sprintf("  match:\n    namespaces: [\"team-%d\"]\n", i%5)
		} else if mixed && i%3 == 2 {
			match = fmt.Sprintf("  match:\n    labelSelector:\n      matchLabels:\n        tier: t%d\n", i%4)
		}
		fmt.Fprintf(&b, `apiVersion: mutations.gatekeeper.sh/v1
kind: ModifySet
metadata:
  name: toleration-%04d
spec:
  applyTo: [{groups: [""], kinds: [Pod], versions: [v1]}]
%s  location: spec.tolerations
  parameters:
    operation: merge
    values:
      fromList:
      - {key: gen.example.com/t%d, operator: Exists, effect: NoSchedule}
`, i, match, i)
	}
	return []byte(b.String())
}
