package kyverno

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/mapc-dev/mapc/compiler/diag"
	"github.com/mapc-dev/mapc/compiler/source"
)

// reader reads one policy document, collecting every problem rather than stopping at the first.
type reader struct {
	doc      *source.Document
	object   string
	problems []error
	notes    []diag.Note
}

// problem records a refusal of field (a dotted path, list indices in brackets) at the line of
// path (document path segments).
func (r *reader) problem(path []string, field, format string, args ...any) {
	r.problems = append(r.problems, &diag.Problem{File: r.doc.File, Line: r.doc.LineOf(path...), Object: r.object, Field: field, Msg: fmt.Sprintf(format, args...)})
}

// Read reads a ClusterPolicy or Policy document: its mutate rules (autogen rules added as Kyverno
// computes them), or the problems that keep it from being translated exactly. A policy without
// mutate rules gives a nil Policy and a note.
func Read(d *source.Document) (*Policy, []error, []diag.Note) {
	obj := d.Object
	r := &reader{doc: d, object: obj.GetKind() + "/" + obj.GetName()}
	p := &Policy{Doc: d, APIVersion: obj.GetAPIVersion(), Kind: obj.GetKind(), Name: obj.GetName(), FailurePolicy: "Fail"}
	if p.Kind == "Policy" {
		p.Namespace = obj.GetNamespace()
		if p.Namespace == "" {
			p.Namespace = "default" // created in the request's namespace, as kubectl sends it
		}
	}
	spec, _ := obj.Object["spec"].(map[string]any)
	r.spec(p, spec)
	rules, _ := spec["rules"].([]any)
	mutates := 0
	for i, raw := range rules {
		rm, _ := raw.(map[string]any)
		path := []string{"spec", "rules", strconv.Itoa(i)}
		field := fmt.Sprintf("spec.rules[%d]", i)
		if name, _ := rm["name"].(string); name != "" {
			field = fmt.Sprintf("spec.rules[%d] (%s)", i, name)
		}
		if _, ok := rm["mutate"]; !ok {
			continue
		}
		mutates++
		if rule := r.rule(rm, path, field); rule != nil {
			p.Rules = append(p.Rules, rule)
		}
	}
	if mutates == 0 && len(r.problems) == 0 {
		r.notes = append(r.notes, diag.Note{Kind: diag.Ignored, File: d.File, Line: d.Line,
			Msg: fmt.Sprintf("%s has no mutate rules; ignored", r.object)})
		return nil, nil, r.notes
	}
	if len(r.problems) > 0 {
		return nil, r.problems, r.notes
	}
	return p, nil, r.notes
}

// spec reads the policy-wide settings.
func (r *reader) spec(p *Policy, spec map[string]any) {
	for _, k := range sortedKeys(spec) {
		v := spec[k]
		path := []string{"spec", k}
		switch k {
		case "rules":
		case "failurePolicy":
			s, _ := v.(string)
			if s != "Fail" && s != "Ignore" {
				r.problem(path, "spec.failurePolicy", "%q is not a failure policy: use Fail or Ignore", s)
				continue
			}
			p.FailurePolicy = s
		case "applyRules":
			s, _ := v.(string)
			switch s {
			case "All":
			case "One":
				p.ApplyOne = true
				r.problem(path, "spec.applyRules", "One (stop after the first rule that applied) is not supported: a MutatingAdmissionPolicy runs every mutation; split the rules into policies or use All")
			default:
				r.problem(path, "spec.applyRules", "%q is not valid: use All or One", s)
			}
		case "admission":
			if b, ok := v.(bool); ok && !b {
				r.problem(path, "spec.admission", "false: the policy never runs on admission requests, so there is nothing to translate; remove the policy from the input")
			}
		case "webhookConfiguration":
			if m, _ := v.(map[string]any); len(m["matchConditions"].([]any)) > 0 {
				r.problem(path, "spec.webhookConfiguration.matchConditions", "not supported yet: the webhook's match conditions are not translated")
			}
		case "background", "validationFailureAction", "validationFailureActionOverrides", "webhookTimeoutSeconds",
			"emitWarning", "schemaValidation", "mutateExistingOnPolicyUpdate", "generateExisting",
			"generateExistingOnPolicyUpdate", "useServerSideApply", "evaluation":
			// Settings of background processing, validation and reports: nothing for admission mutation.
		default:
			r.problem(path, "spec."+k, "unknown field of a Kyverno policy's spec (Kyverno v1.19)")
		}
	}
}

// rule reads one mutate rule.
func (r *reader) rule(rm map[string]any, path []string, field string) *Rule {
	before := len(r.problems)
	rule := &Rule{Field: field, Path: path}
	rule.Name, _ = rm["name"].(string)
	for _, k := range sortedKeys(rm) {
		v := rm[k]
		kp := append(append([]string(nil), path...), k)
		kf := field + "." + k
		switch k {
		case "name":
		case "match":
			rule.Match = r.block(v, kp, kf, true)
		case "exclude":
			rule.Exclude = r.block(v, kp, kf, false)
		case "mutate":
			r.mutate(rule, v, kp, kf)
		case "preconditions":
			if !emptyValue(v) {
				r.problem(kp, kf, "preconditions are not supported yet: the rule cannot be translated")
			}
		case "celPreconditions":
			if !emptyValue(v) {
				r.problem(kp, kf, "CEL preconditions are not supported yet: the rule cannot be translated")
			}
		case "context":
			if !emptyValue(v) {
				r.problem(kp, kf, "context entries (variables, configMap, apiCall, imageRegistry, globalReference) are not supported: a MutatingAdmissionPolicy cannot call the API server or registries while admitting; the rule cannot be translated")
			}
		case "validate", "generate", "verifyImages":
			r.problem(kp, kf, "a rule with both mutate and %s cannot be translated; split it", k)
		case "skipBackgroundRequests", "reportProperties", "imageExtractors":
			if k == "imageExtractors" && !emptyValue(v) {
				r.problem(kp, kf, "image extractors are not supported: they feed images.* variables, which are not translated")
			}
		default:
			r.problem(kp, kf, "unknown field of a Kyverno rule (Kyverno v1.19)")
		}
	}
	if rule.Match.Empty() {
		r.problem(path, field+".match", "a rule must match something: give match.any, match.all or match.resources")
	}
	if len(r.problems) > before {
		return nil
	}
	return rule
}

// mutate reads the rule's mutate block.
func (r *reader) mutate(rule *Rule, v any, path []string, field string) {
	m, ok := v.(map[string]any)
	if !ok {
		r.problem(path, field, "must be an object")
		return
	}
	for _, k := range sortedKeys(m) {
		kp := append(append([]string(nil), path...), k)
		kf := field + "." + k
		switch k {
		case "patchStrategicMerge":
			pm, ok := m[k].(map[string]any)
			if !ok {
				r.problem(kp, kf, "must be an object (a partial resource)")
				continue
			}
			rule.StrategicMerge = pm
		case "patchesJson6902":
			s, _ := m[k].(string)
			ops, err := parseJSON6902(s)
			if err != nil {
				r.problem(kp, kf, "%v", err)
				continue
			}
			rule.JSON6902 = ops
		case "foreach":
			r.problem(kp, kf, "foreach is not supported yet: the rule cannot be translated")
		case "targets":
			if !emptyValue(m[k]) {
				r.problem(kp, kf, "mutating existing resources (targets) happens in Kyverno's background controller, not on admission: a MutatingAdmissionPolicy cannot do it")
			}
		case "mutateExistingOnPolicyUpdate":
		default:
			r.problem(kp, kf, "unknown field of a Kyverno mutate block (Kyverno v1.19)")
		}
	}
	if rule.StrategicMerge != nil && rule.JSON6902 != nil {
		r.problem(path, field, "patchStrategicMerge and patchesJson6902 in one rule: Kyverno applies only one; split them into two rules")
	}
	if rule.StrategicMerge == nil && rule.JSON6902 == nil {
		if _, fe := m["foreach"]; !fe {
			r.problem(path, field, "has no patch: give patchStrategicMerge or patchesJson6902")
		}
	}
}

// block reads a match or exclude block.
func (r *reader) block(v any, path []string, field string, match bool) Block {
	var b Block
	m, ok := v.(map[string]any)
	if !ok {
		r.problem(path, field, "must be an object")
		return b
	}
	direct := map[string]any{}
	for _, k := range sortedKeys(m) {
		kp := append(append([]string(nil), path...), k)
		switch k {
		case "any", "all":
			list, ok := m[k].([]any)
			if !ok {
				r.problem(kp, field+"."+k, "must be a list of resource filters")
				continue
			}
			for i, fv := range list {
				fp := append(append([]string(nil), kp...), strconv.Itoa(i))
				f := r.filter(fv, fp, fmt.Sprintf("%s.%s[%d]", field, k, i))
				if k == "any" {
					b.Any = append(b.Any, f)
				} else {
					b.All = append(b.All, f)
				}
			}
		case "resources", "subjects", "roles", "clusterRoles":
			direct[k] = m[k]
		default:
			r.problem(kp, field+"."+k, "unknown field of a Kyverno match or exclude block (Kyverno v1.19)")
		}
	}
	if len(direct) > 0 {
		if len(b.Any) > 0 || len(b.All) > 0 {
			r.problem(path, field, "give either any/all or resources, not both")
			return b
		}
		b.All = []Filter{r.filter(direct, path, field)}
	}
	return b
}

// filter reads one resource filter: resources (and refuses subjects, roles, clusterRoles).
func (r *reader) filter(v any, path []string, field string) Filter {
	var f Filter
	m, ok := v.(map[string]any)
	if !ok {
		r.problem(path, field, "must be an object")
		return f
	}
	for _, k := range sortedKeys(m) {
		kp := append(append([]string(nil), path...), k)
		kf := field + "." + k
		switch k {
		case "resources":
			r.resources(&f, m[k], kp, kf)
		case "subjects", "roles", "clusterRoles":
			if !emptyValue(m[k]) {
				r.problem(kp, kf, "matching on the requesting user (%s) is not supported yet: the rule cannot be translated", k)
			}
		default:
			r.problem(kp, kf, "unknown field of a Kyverno resource filter (Kyverno v1.19)")
		}
	}
	return f
}

func (r *reader) resources(f *Filter, v any, path []string, field string) {
	m, ok := v.(map[string]any)
	if !ok {
		r.problem(path, field, "must be an object")
		return
	}
	strs := func(k string) []string {
		list, ok := m[k].([]any)
		if !ok {
			r.problem(append(append([]string(nil), path...), k), field+"."+k, "must be a list of strings")
			return nil
		}
		var out []string
		for _, x := range list {
			s, ok := x.(string)
			if !ok {
				r.problem(append(append([]string(nil), path...), k), field+"."+k, "must be a list of strings")
				return nil
			}
			out = append(out, s)
		}
		return out
	}
	for _, k := range sortedKeys(m) {
		kp := append(append([]string(nil), path...), k)
		kf := field + "." + k
		switch k {
		case "kinds":
			f.Kinds = strs(k)
		case "name":
			f.Name, _ = m[k].(string)
		case "names":
			f.Names = strs(k)
		case "namespaces":
			f.Namespaces = strs(k)
		case "operations":
			f.Operations = strs(k)
			for _, op := range f.Operations {
				switch op {
				case "CREATE", "UPDATE":
				case "DELETE", "CONNECT":
					r.problem(kp, kf, "mutating %s requests is not supported: only CREATE and UPDATE are translated", op)
				default:
					r.problem(kp, kf, "%q is not an operation: use CREATE, UPDATE, DELETE or CONNECT", op)
				}
			}
		case "annotations":
			am, ok := m[k].(map[string]any)
			if !ok {
				r.problem(kp, kf, "must be a map of annotation keys to values")
				continue
			}
			f.Annotations = map[string]string{}
			for ak, av := range am {
				s, ok := av.(string)
				if !ok {
					r.problem(kp, kf, "the value of %q must be a string", ak)
					continue
				}
				f.Annotations[ak] = s
			}
		case "selector", "namespaceSelector":
			sel := &metav1.LabelSelector{}
			sm, ok := m[k].(map[string]any)
			if !ok || runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(sm, sel, true) != nil {
				r.problem(kp, kf, "must be a label selector (matchLabels, matchExpressions)")
				continue
			}
			if _, err := metav1.LabelSelectorAsSelector(sel); err != nil {
				r.problem(kp, kf, "%v", err)
				continue
			}
			if wildcardSelector(sel) {
				r.problem(kp, kf, "wildcards in label selectors are not supported yet: the rule cannot be translated")
				continue
			}
			if k == "selector" {
				f.Selector = sel
			} else {
				f.NamespaceSelector = sel
			}
		default:
			r.problem(kp, kf, "unknown field of a Kyverno resource description (Kyverno v1.19)")
		}
	}
}

// wildcardSelector: does the selector use Kyverno's wildcards (in matchLabels keys or values)?
func wildcardSelector(sel *metav1.LabelSelector) bool {
	for k, v := range sel.MatchLabels {
		if strings.ContainsAny(k+v, "*?") {
			return true
		}
	}
	return false
}

// parseJSON6902 reads patchesJson6902: a YAML or JSON list of operations.
func parseJSON6902(s string) ([]Op, error) {
	var raw []map[string]any
	if err := yaml.Unmarshal([]byte(s), &raw); err != nil {
		return nil, fmt.Errorf("not a list of JSON patch operations: %v", err)
	}
	if len(raw) == 0 {
		return nil, fmt.Errorf("has no operations")
	}
	var ops []Op
	for i, m := range raw {
		op, _ := m["op"].(string)
		path, _ := m["path"].(string)
		if path == "" || !strings.HasPrefix(path, "/") {
			return nil, fmt.Errorf("operation %d: path %q must be a JSON pointer beginning with /", i, path)
		}
		v, hasValue := m["value"]
		for k := range m {
			if k != "op" && k != "path" && k != "value" && k != "from" {
				return nil, fmt.Errorf("operation %d: unknown field %q", i, k)
			}
		}
		switch op {
		case "add", "replace":
			if !hasValue {
				return nil, fmt.Errorf("operation %d (%s %s): has no value", i, op, path)
			}
		case "remove":
		case "move", "copy", "test":
			return nil, fmt.Errorf("operation %d: %q is not supported yet: the rule cannot be translated", i, op)
		default:
			return nil, fmt.Errorf("operation %d: %q is not a JSON patch operation: use add, replace or remove", i, op)
		}
		ops = append(ops, Op{Op: op, Path: path, Value: v})
	}
	return ops, nil
}

func emptyValue(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case []any:
		return len(x) == 0
	case map[string]any:
		return len(x) == 0
	}
	return false
}

func sortedKeys(m map[string]any) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
