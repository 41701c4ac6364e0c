package kyverno

// Kyverno's autogen: the rules Kyverno adds to a policy whose rules match Pods, so that the pod
// controllers' pod templates get the same treatment. Kyverno v1.19.1 computes them at admission
// (autogen.Default, which is pkg/autogen/v1) and applies them as if they were written in the
// policy. What follows is that package's code, read on unstructured rules (as internal/kyschema
// decodes them) instead of Kyverno's Go types; each function names the one it follows
// (pkg/autogen/v1 unless said otherwise).
//
// Where Kyverno's types round-trip a value, the rules keep it as written: an empty list Kyverno
// keeps as an empty slice and omits when it marshals it, zero structs it marshals as {}
// (match.resources), numbers of patches it holds as float64 (foreach patchStrategicMerge,
// anyPattern).

import (
	"bytes"
	"encoding/json"
	"regexp"
	"slices"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// AnnotationAutogenControllers is the annotation that chooses the controllers autogen generates
// rules for: "none", "all", or a comma-separated list of kinds (api/kyverno/constants.go).
const AnnotationAutogenControllers = "pod-policies.kyverno.io/autogen-controllers"

// podControllerCronJob is PodControllerCronJob.
const podControllerCronJob = "CronJob"

// podControllers is PodControllers (autogen.go), the controllers autogen generates rules for by
// default.
var podControllers = []string{"DaemonSet", "Deployment", "Job", "StatefulSet", "ReplicaSet", "ReplicationController", "CronJob"}

// podControllerGVK is PodControllerGVKMap (internal/gvk.go): the kinds a generated rule matches.
var podControllerGVK = map[string]string{
	"DaemonSet":             "apps/v1/DaemonSet",
	"Deployment":            "apps/v1/Deployment",
	"Job":                   "batch/v1/Job",
	"StatefulSet":           "apps/v1/StatefulSet",
	"ReplicaSet":            "apps/v1/ReplicaSet",
	"ReplicationController": "v1/ReplicationController",
	"CronJob":               "batch/v1/CronJob",
	"Pod":                   "v1/Pod",
}

// PodTemplate is where a Pod controller of group and kind holds its Pod template, as Kyverno's
// autogen patches it (spec.template; a CronJob's spec.jobTemplate.spec.template), nil for other
// kinds.
func PodTemplate(group, kind string) []string {
	gvk, ok := podControllerGVK[kind]
	if !ok || kind == "Pod" {
		return nil
	}
	g := "" // "v1/Kind" is the core group's
	if parts := strings.Split(gvk, "/"); len(parts) == 3 {
		g = parts[0]
	}
	if g != group {
		return nil
	}
	if kind == podControllerCronJob {
		return []string{"spec", "jobTemplate", "spec", "template"}
	}
	return []string{"spec", "template"}
}

// ComputeRules returns the rules Kyverno applies for policy: its own rules, with, when autogen
// applies, those named autogen-... replaced by the generated ones (autogen-<rule> for the
// controllers other than CronJob, autogen-cronjob-<rule> for CronJob, after each rule they come
// from). It is ComputeRules(policy, "") (autogen.go, computeRules). The rules returned are
// copies.
func ComputeRules(policy *unstructured.Unstructured) []any {
	rules, _ := policySpec(policy)["rules"].([]any)
	applyAutoGen, desired := CanAutoGen(rules)
	if !applyAutoGen {
		desired = []string{"none"}
	}
	actual := desired
	if v, ok := policy.GetAnnotations()[AnnotationAutogenControllers]; ok && applyAutoGen {
		// sets.New(strings.Split(v, ",")...): duplicates go; the order never matters, as
		// every use sorts or searches.
		actual = nil
		for _, c := range strings.Split(v, ",") {
			if !slices.Contains(actual, c) {
				actual = append(actual, c)
			}
		}
	}
	kind := strings.Join(actual, ",")
	if kind == "none" {
		return uCopyRules(rules)
	}
	gen := generateRules(rules, kind)
	if len(gen) == 0 {
		return uCopyRules(rules)
	}
	var out []any
	for _, r := range rules {
		if !isAutogenRuleName(uString(uMap(r), "name")) {
			out = append(out, uCopy(r))
		}
	}
	return append(out, gen...)
}

// uCopyRules copies rules.
func uCopyRules(rules []any) []any {
	out := make([]any, len(rules))
	for i, r := range rules {
		out[i] = uCopy(r)
	}
	return out
}

// policySpec is the policy's spec, or nil.
func policySpec(policy *unstructured.Unstructured) map[string]any {
	s, _ := policy.Object["spec"].(map[string]any)
	return s
}

// CanAutoGen says whether autogen applies to rules and for which controllers (CanAutoGen): not
// if any rule generates, or patches with patchesJson6902 (in foreach too) (the controllers are
// then "none"); not if a match or exclude filter (resources, any[], all[]) names resources (name,
// names), selects them by labels or annotations, or has Pod among other kinds (no controllers);
// not if no filter has Pod or a controller among its kinds. Otherwise all of them.
func CanAutoGen(rules []any) (bool, []string) {
	needed := false
	for _, r := range rules {
		rule := uMap(r)
		if hasGenerate(rule) {
			return false, []string{"none"}
		}
		if m, ok := rule["mutate"].(map[string]any); ok {
			if uString(m, "patchesJson6902") != "" {
				return false, []string{"none"}
			}
			for _, f := range uList(m["foreach"]) {
				if uString(uMap(f), "patchesJson6902") != "" {
					return false, []string{"none"}
				}
			}
		}
		if !filtersSupportAutogen(&needed, uMap(rule["match"])) {
			return false, nil
		}
		if exclude, ok := rule["exclude"].(map[string]any); ok && !filtersSupportAutogen(&needed, exclude) {
			return false, nil
		}
	}
	if !needed {
		return false, nil
	}
	return true, slices.Clone(podControllers)
}

// hasGenerate is Rule.HasGenerate (api/kyverno/v1): a generate that is not empty.
func hasGenerate(rule map[string]any) bool {
	g, ok := rule["generate"].(map[string]any)
	return ok && len(g) > 0
}

// filtersSupportAutogen runs checkAutogenSupport on a match or exclude block's resources, then
// its any and all filters, as CanAutoGen does.
func filtersSupportAutogen(needed *bool, mr map[string]any) bool {
	if !checkAutogenSupport(needed, uMap(mr["resources"])) {
		return false
	}
	for _, key := range []string{"any", "all"} {
		for _, f := range uList(mr[key]) {
			if !checkAutogenSupport(needed, uMap(uMap(f)["resources"])) {
				return false
			}
		}
	}
	return true
}

// checkAutogenSupport: a resource description that names, selects or mixes Pod with other kinds
// stops autogen; one with Pod or a controller among its kinds (written exactly so: v1/Pod is
// not) makes it needed.
func checkAutogenSupport(needed *bool, rd map[string]any) bool {
	kinds := uStrings(rd["kinds"])
	if uString(rd, "name") != "" || len(uList(rd["names"])) > 0 || rd["selector"] != nil || rd["annotations"] != nil || isKindOtherthanPod(kinds) {
		return false
	}
	for _, k := range kinds {
		if k == "Pod" || slices.Contains(podControllers, k) {
			*needed = true
		}
	}
	return true
}

// isKindOtherthanPod: more than one kind, one of them Pod.
func isKindOtherthanPod(kinds []string) bool {
	return len(kinds) > 1 && containsKind(kinds, "Pod")
}

// generateRules generates, for each rule, its rule for the controllers other than CronJob, then
// its rule for CronJob, each dropped when it comes out nil.
func generateRules(rules []any, controllers string) []any {
	var out []any
	for _, r := range rules {
		rule := uCopy(r).(map[string]any)
		if gen := createRule(generateRuleForControllers(rule, stripCronJob(controllers))); gen != nil {
			out = append(out, convertRule(gen, "Pod"))
		}
		if gen := createRule(generateCronJobRule(rule, controllers)); gen != nil {
			out = append(out, convertRule(gen, "Cronjob"))
		}
	}
	return out
}

// stripCronJob removes CronJob from controllers, sorting them.
func stripCronJob(controllers string) string {
	var out []string
	for _, c := range splitKinds(controllers) {
		if c != podControllerCronJob {
			out = append(out, c)
		}
	}
	return strings.Join(out, ",")
}

// splitKinds splits controllers at commas and sorts them.
func splitKinds(controllers string) []string {
	kinds := strings.Split(controllers, ",")
	sort.Strings(kinds)
	return kinds
}

func isAutogenRuleName(name string) bool { return strings.HasPrefix(name, "autogen-") }

// getAutogenRuleName is prefix-name cut at 63 bytes.
func getAutogenRuleName(prefix, name string) string {
	name = prefix + "-" + name
	if len(name) > 63 {
		name = name[:63]
	}
	return name
}

// generateRuleForControllers is the rule for the controllers (not CronJob) of a rule matching
// Pods and, if it excludes kinds, excluding Pods. "all" is every controller but CronJob; a list
// keeps the controllers Kyverno knows, sorted, and when it has none it is used as it is.
func generateRuleForControllers(rule map[string]any, controllers string) map[string]any {
	if isAutogenRuleName(uString(rule, "name")) || controllers == "" {
		return nil
	}
	matchKinds := getKinds(uMap(rule["match"]))
	var excludeKinds []string
	if exclude, ok := rule["exclude"].(map[string]any); ok {
		excludeKinds = getKinds(exclude)
	}
	if !containsKind(matchKinds, "Pod") || (len(excludeKinds) != 0 && !containsKind(excludeKinds, "Pod")) {
		return nil
	}
	if controllers == "all" {
		controllers = "DaemonSet,Deployment,Job,StatefulSet,ReplicaSet,ReplicationController"
	} else if controllers != "none" {
		var validated []string
		for _, c := range splitKinds(controllers) {
			if slices.Contains(podControllers, c) && c != podControllerCronJob {
				validated = append(validated, c)
			}
		}
		if len(validated) > 0 {
			controllers = strings.Join(validated, ",")
		}
	}
	return generateRule(getAutogenRuleName("autogen", uString(rule, "name")), rule, "template", "spec/template", splitKinds(controllers),
		func(filters []any, kinds []string) []any { return getAnyAllAutogenRule(filters, "Pod", kinds) })
}

// generateCronJobRule is the rule for CronJob, made from the rule generateRuleForControllers
// makes with all the controllers, when they include CronJob or all (as substrings).
func generateCronJobRule(rule map[string]any, controllers string) map[string]any {
	if !strings.Contains(controllers, podControllerCronJob) && !strings.Contains(controllers, "all") {
		return nil
	}
	return generateRule(getAutogenRuleName("autogen-cronjob", uString(rule, "name")), generateRuleForControllers(rule, controllers), "jobTemplate", "spec/jobTemplate/spec/template", []string{podControllerCronJob},
		func(filters []any, kinds []string) []any {
			out := uCopy(filters).([]any)
			for _, f := range out {
				setKinds(uMap(f), kinds)
			}
			return out
		})
}

// getAnyAllAutogenRule gives the filters with kind match among their kinds the kinds instead.
func getAnyAllAutogenRule(filters []any, match string, kinds []string) []any {
	out := uCopy(filters).([]any)
	for _, f := range out {
		if containsKind(uStrings(uMap(uMap(f)["resources"])["kinds"]), match) {
			setKinds(uMap(f), kinds)
		}
	}
	return out
}

// setKinds sets a filter's resources.kinds to kinds, as ConvertKindsToGVK writes them.
func setKinds(filter map[string]any, kinds []string) {
	if filter == nil {
		return
	}
	rd, ok := filter["resources"].(map[string]any)
	if !ok {
		rd = map[string]any{}
		filter["resources"] = rd
	}
	rd["kinds"] = convertKindsToGVK(kinds)
}

// convertKindsToGVK is ConvertKindsToGVK (internal/gvk.go).
func convertKindsToGVK(kinds []string) []any {
	out := make([]any, 0, len(kinds))
	for _, k := range kinds {
		if gvk, ok := podControllerGVK[k]; ok {
			k = gvk
		}
		out = append(out, k)
	}
	return out
}

// generateRule is the rule named name for kinds: the match (any, else all, else resources) and
// exclude filters given kinds by grf (exclude.resources only when it has kinds), and the rule's
// patch or pattern moved under spec.<tplKey>. A mutate rule keeps only its patchStrategicMerge,
// or its foreach with list, context, preconditions and patchStrategicMerge of each entry. A rule
// with none of what it knows (patchStrategicMerge, foreach, pattern, deny, podSecurity,
// anyPattern, validate foreach, validate cel, verifyImages) has no generated rule.
func generateRule(name string, rule map[string]any, tplKey, shift string, kinds []string, grf func([]any, []string) []any) map[string]any {
	if rule == nil {
		return nil
	}
	rule = uCopy(rule).(map[string]any)
	rule["name"] = name
	match, ok := rule["match"].(map[string]any)
	if !ok {
		match = map[string]any{}
		rule["match"] = match
	}
	if anyF := uList(match["any"]); len(anyF) > 0 {
		match["any"] = grf(anyF, kinds)
	} else if allF := uList(match["all"]); len(allF) > 0 {
		match["all"] = grf(allF, kinds)
	} else {
		setKinds(match, kinds)
	}
	if exclude, ok := rule["exclude"].(map[string]any); ok {
		if anyF := uList(exclude["any"]); len(anyF) > 0 {
			exclude["any"] = grf(anyF, kinds)
		} else if allF := uList(exclude["all"]); len(allF) > 0 {
			exclude["all"] = grf(allF, kinds)
		} else if len(uList(uMap(exclude["resources"])["kinds"])) != 0 {
			setKinds(exclude, kinds)
		}
	}
	wrap := func(v any) map[string]any { return map[string]any{"spec": map[string]any{tplKey: v}} }
	if m, ok := rule["mutate"].(map[string]any); ok {
		if target := m["patchStrategicMerge"]; target != nil {
			rule["mutate"] = map[string]any{"patchStrategicMerge": wrap(target)}
			return rule
		}
		if fe := uList(m["foreach"]); len(fe) > 0 {
			out := make([]any, 0, len(fe))
			for _, f := range fe {
				f := uMap(f)
				e := map[string]any{"patchStrategicMerge": wrap(f["patchStrategicMerge"])}
				if l := uString(f, "list"); l != "" {
					e["list"] = l
				}
				if c := uList(f["context"]); len(c) > 0 {
					e["context"] = c
				}
				if p, ok := f["preconditions"]; ok && p != nil {
					e["preconditions"] = p
				}
				out = append(out, e)
			}
			rule["mutate"] = map[string]any{"foreach": out}
			return rule
		}
	}
	if v, ok := rule["validate"].(map[string]any); ok {
		// Every validate rule generated keeps these, and a message with its $(...) references
		// shifted.
		common := func(pivot string) map[string]any {
			out := map[string]any{}
			if msg := findAndShiftReferences(uString(v, "message"), shift, pivot); msg != "" {
				out["message"] = msg
			}
			for _, k := range []string{"failureAction", "failureActionOverrides", "allowExistingViolations"} {
				if x, ok := v[k]; ok && x != nil && !uIsEmptyList(x) {
					out[k] = x
				}
			}
			return out
		}
		if target := v["pattern"]; target != nil {
			nv := common("pattern")
			nv["pattern"] = wrap(target)
			rule["validate"] = nv
			return rule
		}
		if deny, ok := v["deny"]; ok && deny != nil {
			nv := common("deny")
			nv["deny"] = deny
			rule["validate"] = nv
			return rule
		}
		if ps, ok := v["podSecurity"].(map[string]any); ok {
			nv := common("podSecurity")
			nps := map[string]any{}
			for _, k := range []string{"level", "version"} {
				if s := uString(ps, k); s != "" {
					nps[k] = s
				}
			}
			if ex := uList(ps["exclude"]); len(ex) > 0 {
				nps["exclude"] = ex
			}
			nv["podSecurity"] = nps
			rule["validate"] = nv
			return rule
		}
		if ap := v["anyPattern"]; ap != nil {
			var patterns []any
			for _, p := range uList(ap) {
				patterns = append(patterns, wrap(p))
			}
			nv := common("anyPattern")
			nv["anyPattern"] = patterns
			rule["validate"] = nv
			return rule
		}
		if fe := uList(v["foreach"]); len(fe) > 0 {
			nv := common("pattern")
			nv["foreach"] = fe
			rule["validate"] = nv
			return rule
		}
		if cel, ok := v["cel"].(map[string]any); ok && len(cel) > 0 {
			return rule
		}
	}
	if _, ok := rule["verifyImages"].([]any); ok {
		return rule
	}
	return nil
}

// regexReferences is RegexReferences (pkg/engine/variables/regex): $(...) references.
var regexReferences = regexp.MustCompile(`^\$\(.[^\ ]*\)|[^\\]\$\(.[^\ ]*\)`)

// findAndShiftReferences is FindAndShiftReferences (pkg/engine/variables): each $(...)
// reference in value gets shift after pivot (after anyPattern/<index> for anyPattern, the index
// of the first reference).
func findAndShiftReferences(value, shift, pivot string) string {
	for _, reference := range regexReferences.FindAllString(value, -1) {
		initial := reference[:2] == `$(`
		oldReference := reference
		if !initial {
			reference = reference[1:]
		}
		index := strings.Index(reference, pivot)
		if pivot == "anyPattern" {
			// Kyverno slices from index+len(pivot)+1 even when pivot is missing (index -1);
			// where that slice would be out of range Kyverno panics, and here the index is
			// empty. The pivot becomes anyPattern/<index> for the references after this one
			// too: only those of the first reference's pattern are shifted.
			ruleIndex := ""
			if from := index + len(pivot) + 1; from <= len(reference) {
				ruleIndex = strings.Split(reference[from:], "/")[0]
			}
			pivot = pivot + "/" + ruleIndex
		}
		replacement := ""
		if !initial {
			replacement = string(oldReference[0])
		}
		replacement += strings.ReplaceAll(reference, pivot, pivot+"/"+shift)
		value = strings.Replace(value, oldReference, replacement, 1)
	}
	return value
}

// ruleFields are the fields of the kyvernoRule struct (rule.go), in which a generated rule is
// written out: the others (generate, imageExtractors) are lost.
var ruleFields = []string{"name", "match", "exclude", "celPreconditions", "context", "preconditions", "mutate", "validate", "verifyImages", "skipBackgroundRequests", "reportProperties"}

// createRule keeps of a generated rule the fields of kyvernoRule that are not empty.
func createRule(rule map[string]any) map[string]any {
	if rule == nil {
		return nil
	}
	out := map[string]any{"name": uString(rule, "name")}
	for _, k := range ruleFields[1:] {
		v, ok := rule[k]
		if !ok || v == nil {
			continue
		}
		switch k {
		case "match", "exclude", "mutate", "validate", "reportProperties":
			if m, ok := v.(map[string]any); ok && len(m) == 0 {
				continue
			}
		case "context", "celPreconditions":
			if len(uList(v)) == 0 {
				continue
			}
		case "preconditions":
			// Either a list of conditions or any/all.
			if l, ok := v.([]any); ok && len(l) == 0 {
				continue
			}
			if m, ok := v.(map[string]any); ok && m["any"] == nil && m["all"] == nil {
				continue
			}
		}
		out[k] = v
	}
	return out
}

// Variable shifts of convertRule (podReplacementRules, podCELReplacementRules,
// cronJobReplacementRules, cronJobCELReplacementRules).
var (
	podReplacements = [][2]string{
		{"request.object.spec", "request.object.spec.template.spec"},
		{"request.oldObject.spec", "request.oldObject.spec.template.spec"},
		{"request.object.metadata", "request.object.spec.template.metadata"},
		{"request.oldObject.metadata", "request.oldObject.spec.template.metadata"},
	}
	podCELReplacements = [][2]string{
		{"object.spec", "object.spec.template.spec"},
		{"oldObject.spec", "oldObject.spec.template.spec"},
		{"object.metadata", "object.spec.template.metadata"},
		{"oldObject.metadata", "oldObject.spec.template.metadata"},
	}
	cronJobReplacements = [][2]string{
		{"request.object.spec", "request.object.spec.jobTemplate.spec.template.spec"},
		{"request.oldObject.spec", "request.oldObject.spec.jobTemplate.spec.template.spec"},
		{"request.object.metadata", "request.object.spec.jobTemplate.spec.template.metadata"},
		{"request.oldObject.metadata", "request.oldObject.spec.jobTemplate.spec.template.metadata"},
	}
	cronJobCELReplacements = [][2]string{
		{"object.spec", "object.spec.jobTemplate.spec.template.spec"},
		{"oldObject.spec", "oldObject.spec.jobTemplate.spec.template.spec"},
		{"object.metadata", "object.spec.jobTemplate.spec.template.metadata"},
		{"oldObject.metadata", "oldObject.spec.jobTemplate.spec.template.metadata"},
	}
)

// convertRule (with updateFields) shifts the variables of a generated rule: in its JSON, every
// occurrence of request.object.spec, request.oldObject.spec, request.object.metadata and
// request.oldObject.metadata, anywhere (names, keys and values, parts of longer words), moves
// into the pod template; in the CEL ones (a validate rule with cel) object.spec ... do.
func convertRule(rule map[string]any, kind string) any {
	data, err := json.Marshal(rule)
	if err != nil {
		// The rule came from JSON.
		panic(err)
	}
	isCEL := uMap(rule["validate"])["cel"] != nil
	var replacements [][2]string
	switch {
	case kind == "Pod" && isCEL:
		replacements = podCELReplacements
	case kind == "Pod":
		replacements = podReplacements
	case isCEL:
		replacements = cronJobCELReplacements
	default:
		replacements = cronJobReplacements
	}
	for _, r := range replacements {
		data = bytes.ReplaceAll(data, []byte(r[0]), []byte(r[1]))
	}
	var out any
	if err := utiljson.Unmarshal(data, &out); err != nil {
		// Letters and dots replaced by letters and dots leave JSON as it was.
		panic(err)
	}
	return out
}

// getKinds is MatchResources.GetKinds (api/kyverno/v1): the kinds of resources, all, any.
func getKinds(mr map[string]any) []string {
	kinds := uStrings(uMap(mr["resources"])["kinds"])
	for _, key := range []string{"all", "any"} {
		for _, f := range uList(mr[key]) {
			kinds = append(kinds, uStrings(uMap(uMap(f)["resources"])["kinds"])...)
		}
	}
	return kinds
}

// versionRegex is pkg/utils/kube's.
var versionRegex = regexp.MustCompile(`^(v\d((alpha|beta)\d)?|\*)$`)

// containsKind is ContainsKind (pkg/utils/kube): kind is among kinds written as Kind,
// version/Kind or group/version/Kind, with or without a subresource.
func containsKind(kinds []string, kind string) bool {
	for _, e := range kinds {
		_, k := getKindFromGVK(e)
		if parts := strings.Split(k, "/"); len(parts) == 2 {
			k = parts[0]
		}
		if k == kind {
			return true
		}
	}
	return false
}

// getKindFromGVK is GetKindFromGVK (pkg/utils/kube).
func getKindFromGVK(s string) (string, string) {
	formatSubresource := func(s string) string { return strings.Replace(s, ".", "/", 1) }
	parts := strings.Split(s, "/")
	switch len(parts) {
	case 1:
		return "", formatSubresource(s)
	case 2:
		if parts[0] == "*" && parts[1] == "*" {
			return "", parts[0] + "/" + parts[1]
		}
		if versionRegex.MatchString(parts[0]) {
			return parts[0], formatSubresource(parts[1])
		}
		return "", parts[0] + "/" + parts[1]
	case 3:
		if versionRegex.MatchString(parts[0]) {
			return parts[0], parts[1] + "/" + parts[2]
		}
		return parts[0] + "/" + parts[1], formatSubresource(parts[2])
	case 4:
		return parts[0] + "/" + parts[1], parts[2] + "/" + parts[3]
	}
	return "", ""
}

// uCopy copies a JSON value (numbers as int64 or float64, as unstructured objects hold them).
func uCopy(v any) any {
	data, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	var out any
	if err := utiljson.Unmarshal(data, &out); err != nil {
		panic(err)
	}
	return out
}

func uMap(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

func uList(v any) []any {
	l, _ := v.([]any)
	return l
}

func uIsEmptyList(v any) bool {
	l, ok := v.([]any)
	return ok && len(l) == 0
}

func uString(m map[string]any, key string) string {
	s, _ := m[key].(string)
	return s
}

func uStrings(v any) []string {
	var out []string
	for _, x := range uList(v) {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	return out
}
