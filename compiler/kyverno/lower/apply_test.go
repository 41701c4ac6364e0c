package lower

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/version"
	"sigs.k8s.io/yaml"

	"github.com/mapc-dev/mapc/cel"
)

// TestApply: labels and annotations (at the object's metadata and at the Pod template's of the
// kinds Kyverno's autogen patches) become an ApplyConfiguration; anything an apply merges
// otherwise than Kyverno's strategic merge, or that Kyverno writes and the API server cannot
// decode, is left to the JSONPatch, with the field and why.
func TestApply(t *testing.T) {
	ns := cel.Field(cel.Ident("request"), "namespace")
	for _, tc := range []struct {
		name, apiVersion, kind, patch string
		vars                          map[string]any // substituted variables: key → value
		want, whyNot                  string
	}{
		{name: "labels", apiVersion: "v1", kind: "Pod", patch: `{metadata: {labels: {team: a, app: b}}}`,
			want: `Object{metadata: Object.metadata{labels: {"app": "b", "team": "a"}}}`},
		{name: "add anchor", apiVersion: "v1", kind: "ConfigMap", patch: `{metadata: {annotations: {"+(cost)": shared, owner: x}}}`,
			want: `Object{metadata: Object.metadata{annotations: {?"cost": ((object[?"metadata"][?"annotations"][?"cost"].orValue(null)) == (null)) ? (optional.of("shared")) : (optional.none()), "owner": "x"}}}`},
		{name: "a string variable", apiVersion: "v1", kind: "Pod", patch: `{metadata: {labels: {team: V}}}`, vars: map[string]any{"V": expr{e: ns, t: tStr}},
			want: `Object{metadata: Object.metadata{labels: {"team": string(request.namespace)}}}`},
		{name: "template", apiVersion: "apps/v1", kind: "Deployment", patch: `{spec: {template: {metadata: {labels: {team: a}}}}}`,
			want: `Object{spec: Object.spec{template: Object.spec.template{metadata: Object.spec.template.metadata{labels: {"team": "a"}}}}}`},
		{name: "CronJob template", apiVersion: "batch/v1", kind: "CronJob", patch: `{spec: {jobTemplate: {spec: {template: {metadata: {labels: {team: a}}}}}}}`,
			want: `Object{spec: Object.spec{jobTemplate: Object.spec.jobTemplate{spec: Object.spec.jobTemplate.spec{template: Object.spec.jobTemplate.spec.template{metadata: Object.spec.jobTemplate.spec.template.metadata{labels: {"team": "a"}}}}}}}`},
		{name: "empty maps dropped", apiVersion: "v1", kind: "Pod", patch: `{metadata: {labels: {team: a}, annotations: {}}}`,
			want: `Object{metadata: Object.metadata{labels: {"team": "a"}}}`},
		{name: "ReplicationController template", apiVersion: "v1", kind: "ReplicationController", patch: `{spec: {template: {metadata: {labels: {team: a}}}}}`,
			want: `Object{spec: Object.spec{template: Object.spec.template{metadata: Object.spec.template.metadata{labels: {"team": "a"}}}}}`},
		// Counter-cases.
		{name: "a kind of another group named like a controller", apiVersion: "example.com/v1", kind: "Deployment", patch: `{spec: {template: {metadata: {labels: {team: a}}}}}`, whyNot: "spec: not labels"},
		{name: "nothing left", apiVersion: "v1", kind: "Pod", patch: `{metadata: {labels: {}}}`, whyNot: "changes nothing"},
		{name: "a Pod's spec", apiVersion: "v1", kind: "Pod", patch: `{spec: {template: {metadata: {labels: {team: a}}}}}`, whyNot: "spec: not labels or annotations"},
		{name: "a template where the kind has none", apiVersion: "v1", kind: "Service", patch: `{spec: {template: {metadata: {labels: {team: a}}}}}`, whyNot: "spec: not labels"},
		{name: "other metadata", apiVersion: "v1", kind: "Pod", patch: `{metadata: {labels: {team: a}, finalizers: [x]}}`, whyNot: "metadata.finalizers: not a map"},
		{name: "other metadata map", apiVersion: "v1", kind: "Pod", patch: `{metadata: {ownerReferences: {a: b}}}`, whyNot: "metadata.ownerReferences: not labels"},
		{name: "removal", apiVersion: "v1", kind: "Pod", patch: `{metadata: {labels: {team: null}}}`, whyNot: "metadata.labels.team: a value other than a string"},
		{name: "a boolean", apiVersion: "v1", kind: "Pod", patch: `{metadata: {labels: {team: true}}}`, whyNot: "metadata.labels.team: a value other than a string"},
		{name: "a variable that can be a number", apiVersion: "v1", kind: "Pod", patch: `{metadata: {labels: {team: V}}}`, vars: map[string]any{"V": expr{e: ns, t: tStr | tInt}},
			whyNot: "metadata.labels.team: a value that can be other than a string"},
		{name: "condition anchor", apiVersion: "v1", kind: "Pod", patch: `{metadata: {labels: {"(app)": web, team: a}}}`, whyNot: "metadata.labels.(app): a condition"},
		{name: "condition on metadata", apiVersion: "v1", kind: "Pod", patch: `{metadata: {"(labels)": {app: web}, annotations: {a: b}}}`, whyNot: "metadata.(labels): an anchor"},
		{name: "directive", apiVersion: "v1", kind: "Pod", patch: `{metadata: {labels: {"$patch": replace, team: a}}}`, whyNot: "metadata.labels.$patch: a condition, anchor or directive"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var patch map[string]any
			if err := yaml.Unmarshal([]byte(tc.patch), &patch); err != nil {
				t.Fatal(err)
			}
			substitute := func(m map[string]any) {}
			substitute = func(m map[string]any) {
				for k, v := range m {
					switch x := v.(type) {
					case map[string]any:
						substitute(x)
					case string:
						if e, ok := tc.vars[x]; ok {
							m[k] = e
						}
					}
				}
			}
			substitute(patch)
			got, why := Apply(tc.apiVersion, tc.kind, patch)
			switch {
			case tc.whyNot != "" && got != nil:
				t.Fatalf("an ApplyConfiguration %s, want none because %q", cel.String(got), tc.whyNot)
			case tc.whyNot != "" && !strings.Contains(why, tc.whyNot):
				t.Fatalf("no ApplyConfiguration because %q, want %q", why, tc.whyNot)
			case tc.whyNot == "" && got == nil:
				t.Fatalf("no ApplyConfiguration: %s", why)
			case tc.whyNot == "" && cel.String(got) != tc.want:
				t.Fatalf("got\n%s\nwant\n%s", cel.String(got), tc.want)
			}
			if got != nil {
				if err := cel.NewEnv(version.MajorMinor(1, 37)).CheckApplyConfiguration(cel.String(got)); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}
