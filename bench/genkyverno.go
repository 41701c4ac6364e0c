package bench

import (
	"fmt"
	"strings"
)

// kyvernoFamilies are the kinds of rule GenerateKyverno draws from, in turn.
var kyvernoFamilies = []string{
	"labels",         // patchStrategicMerge of a Pod's labels, an annotation with an add anchor
	"anchor",         // a conditional anchor selecting the containers of an image tag
	"sidecar",        // a container merged by name (keyed list), in team namespaces
	"env",            // an env variable merged into a named container (nested keyed lists)
	"json6902",       // JSON patch operations on ConfigMaps selected by a label
	"foreach",        // foreach over the containers with a per-element precondition
	"precondition",   // rule preconditions on the request's namespace (not request.object's, which autogen rewrites to the Pod template's, where Kyverno finds none and fails) and the operation
	"deployment",     // a Deployment rule (no autogen): JSON patch of labels and a strategic merge
	"namespaced",     // a namespaced Policy
	"exclude-labels", // a Pod rule excluding kube-* namespaces and labelled Pods
}

// GenerateKyverno writes n distinct Kyverno policies (ClusterPolicies, one family in ten a
// namespaced Policy) as one YAML stream, for compile throughput: labels and annotations with add
// anchors, conditional anchors, keyed lists (containers, env variables), JSON patches, foreach
// with per-element preconditions, rule preconditions, match and exclude blocks; every Pod rule is
// extended by Kyverno's autogen to the Pod controllers. Each policy has one or two mutate rules and
// names its own keys, values and containers, so that they are distinct.
func GenerateKyverno(n int) []byte { return generateKyverno(0, n) }

// generateKyverno writes policies from to from+n-1 of GenerateKyverno's stream.
func generateKyverno(from, n int) []byte {
	var b strings.Builder
	for i := from; i < from+n; i++ {
		if i > from {
			b.WriteString("---\n")
		}
		fam := kyvernoFamilies[i%len(kyvernoFamilies)]
		team := fmt.Sprintf("team-%d", i%25)
		kind, ns := "ClusterPolicy", ""
		if fam == "namespaced" {
			kind, ns = "Policy", fmt.Sprintf("\n  namespace: %s", team)
		}
		fmt.Fprintf(&b, "apiVersion: kyverno.io/v1\nkind: %s\nmetadata:\n  name: gen-%05d%s\n  annotations:\n    policies.kyverno.io/description: generated, family %s\nspec:\n  rules:\n", kind, i, ns, fam)
		pods := "    match:\n      any:\n      - resources:\n          kinds: [Pod]\n"
		switch fam {
		case "labels":
			fmt.Fprintf(&b, "  - name: labels\n%s    mutate:\n      patchStrategicMerge:\n        metadata:\n          labels:\n            gen.example.com/l%d: v%d\n          annotations:\n            +(gen.example.com/a%d): default-%d\n",
				pods, i, i, i, i)
		case "anchor":
			fmt.Fprintf(&b, "  - name: pull-policy\n%s    mutate:\n      patchStrategicMerge:\n        spec:\n          containers:\n          - (image): \"*:v%d\"\n            imagePullPolicy: Always\n",
				pods, i)
		case "sidecar":
			fmt.Fprintf(&b, "  - name: sidecar\n    match:\n      any:\n      - resources:\n          kinds: [Pod]\n          namespaces: [\"%s\", \"shared-*\"]\n    mutate:\n      patchStrategicMerge:\n        spec:\n          containers:\n          - name: gen-sidecar-%d\n            image: registry.example/sidecar:%d\n            resources:\n              requests:\n                cpu: 10m\n",
				team, i, i)
		case "env":
			fmt.Fprintf(&b, "  - name: env\n%s    mutate:\n      patchStrategicMerge:\n        spec:\n          containers:\n          - (name): app\n            env:\n            - name: GEN_%d\n              value: \"%d\"\n",
				pods, i, i)
		case "json6902":
			fmt.Fprintf(&b, "  - name: data\n    match:\n      any:\n      - resources:\n          kinds: [ConfigMap]\n          selector:\n            matchLabels:\n              gen.example.com/part-of: app-%d\n    mutate:\n      patchesJson6902: |-\n        - op: add\n          path: /data/gen-%d\n          value: \"%d\"\n        - op: add\n          path: /metadata/annotations/gen.example.com~1c%d\n          value: managed\n        - op: remove\n          path: /data/debug-%d\n",
				i%10, i, i, i, i)
		case "foreach":
			fmt.Fprintf(&b, "  - name: per-container\n%s    mutate:\n      foreach:\n      - list: request.object.spec.containers\n        preconditions:\n          all:\n          - key: \"{{ element.image }}\"\n            operator: NotEquals\n            value: registry-%d.example/*\n        patchStrategicMerge:\n          spec:\n            containers:\n            - name: \"{{ element.name }}\"\n              env:\n              - name: GEN_FOREACH_%d\n                value: \"{{ element.name }}\"\n",
				pods, i, i)
		case "precondition":
			fmt.Fprintf(&b, "  - name: annotate\n%s    preconditions:\n      all:\n      - key: \"{{ request.namespace }}\"\n        operator: AnyIn\n        value: [\"%s\", \"team-%d\"]\n      - key: \"{{ request.operation }}\"\n        operator: Equals\n        value: CREATE\n    mutate:\n      patchStrategicMerge:\n        metadata:\n          annotations:\n            gen.example.com/p%d: \"true\"\n",
				pods, team, (i+1)%25, i)
		case "deployment":
			fmt.Fprintf(&b, "  - name: labels\n    match:\n      any:\n      - resources:\n          kinds: [apps/v1/Deployment]\n    mutate:\n      patchesJson6902: |-\n        - op: add\n          path: /metadata/labels/gen.example.com~1d%d\n          value: v%d\n  - name: template\n    match:\n      any:\n      - resources:\n          kinds: [Deployment]\n    mutate:\n      patchStrategicMerge:\n        spec:\n          template:\n            metadata:\n              annotations:\n                +(gen.example.com/t%d): \"%d\"\n",
				i, i, i, i)
		case "namespaced":
			fmt.Fprintf(&b, "  - name: labels\n%s    mutate:\n      patchStrategicMerge:\n        metadata:\n          labels:\n            gen.example.com/team-l%d: %s\n",
				pods, i, team)
		case "exclude-labels":
			fmt.Fprintf(&b, "  - name: node-selector\n%s    exclude:\n      any:\n      - resources:\n          namespaces: [\"kube-*\"]\n      - resources:\n          selector:\n            matchLabels:\n              gen.example.com/skip: \"%d\"\n    mutate:\n      patchStrategicMerge:\n        spec:\n          securityContext:\n            +(runAsNonRoot): true\n          nodeSelector:\n            gen.example.com/pool-%d: \"true\"\n",
				pods, i%7, i)
		}
	}
	return []byte(b.String())
}
