package suite

import (
	"fmt"
	"regexp"
	"strings"
	"sync"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/validate/content"
	genericvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/util/version"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/mutating"
	"k8s.io/apiserver/pkg/admission/plugin/policy/mutating/patch"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	"k8s.io/apiserver/pkg/cel/environment"
)

// The API server validates a MutatingAdmissionPolicy and its binding when they are created, in
// k8s.io/kubernetes pkg/apis/admissionregistration/validation, which cannot be imported. This file
// re-implements the part of it that can reject a policy mapc or a person writes: required fields,
// enums, rules, selectors and every CEL expression compiled by k8s.io/apiserver's own compiler in
// the strict environment used for new expressions (environment.NewExpressions) of the target
// Kubernetes version, with variables composed as the API server composes them. It is checked after
// the defaults the API server applies first (failurePolicy Fail, matchPolicy Equivalent, empty
// selectors, rule scope "*"). Not re-implemented: CEL cost estimation (the API server rejects no
// policy for its estimated cost; the runtime budget is enforced when evaluating), and
// status/update-only rules.

// fieldError is one problem at a field path ("spec.mutations[0].patchType").
type fieldError struct {
	Field string
	Msg   string
}

type errs []fieldError

func (e *errs) add(f *field.Path, format string, a ...any) {
	*e = append(*e, fieldError{Field: f.String(), Msg: fmt.Sprintf(format, a...)})
}

func (e *errs) addList(l field.ErrorList) {
	for _, fe := range l {
		msg := fe.ErrorBody()
		*e = append(*e, fieldError{Field: fe.Field, Msg: msg})
	}
}

var (
	failurePolicies     = sets.New(string(admissionregistrationv1.Fail), string(admissionregistrationv1.Ignore))
	matchPolicies       = sets.New(string(admissionregistrationv1.Exact), string(admissionregistrationv1.Equivalent))
	reinvocation        = sets.New(string(admissionregistrationv1.NeverReinvocationPolicy), string(admissionregistrationv1.IfNeededReinvocationPolicy))
	patchTypes          = sets.New(string(admissionregistrationv1.PatchTypeApplyConfiguration), string(admissionregistrationv1.PatchTypeJSONPatch))
	operations          = sets.New("*", "CREATE", "UPDATE", "DELETE", "CONNECT")
	scopes              = sets.New("*", "Cluster", "Namespaced")
	notFoundActions     = sets.New(string(admissionregistrationv1.AllowAction), string(admissionregistrationv1.DenyAction))
	celIdent            = regexp.MustCompile(`^[_a-zA-Z][_a-zA-Z0-9]*$`)
	celReserved         = sets.New("true", "false", "null", "in", "as", "break", "const", "continue", "else", "for", "function", "if", "import", "let", "loop", "package", "namespace", "return", "var", "void", "while")
	statelessCompilers  sync.Map // "1.34" -> plugincel.Compiler
	maxMatchConditions  = 64
	selectorValidations = metav1validation.LabelSelectorValidationOptions{}
)

func envSet(kv *version.Version) *environment.EnvSet {
	// A server checks new expressions against the previous minor version's CEL features.
	return environment.MustBaseEnvSet(version.MajorMinor(kv.Major(), kv.Minor()-1))
}

func statelessCompiler(kv *version.Version) plugincel.Compiler {
	key := fmt.Sprintf("%d.%d", kv.Major(), kv.Minor())
	if c, ok := statelessCompilers.Load(key); ok {
		return c.(plugincel.Compiler)
	}
	c, _ := statelessCompilers.LoadOrStore(key, plugincel.NewCompiler(envSet(kv)))
	return c.(plugincel.Compiler)
}

// checkPolicy validates a (defaulted) policy as the API server does on create at version kv.
func checkPolicy(p *admissionregistrationv1.MutatingAdmissionPolicy, kv *version.Version) errs {
	var e errs
	for _, msg := range genericvalidation.NameIsDNSSubdomain(p.Name, false) {
		e.add(field.NewPath("metadata", "name"), "%s", msg)
	}
	if p.Name == "" {
		e.add(field.NewPath("metadata", "name"), "Required value: name or generateName is required")
	}
	spec := &p.Spec
	fp := field.NewPath("spec")
	if spec.FailurePolicy != nil && !failurePolicies.Has(string(*spec.FailurePolicy)) {
		e.add(fp.Child("failurePolicy"), "Unsupported value: %q: supported values: %s", *spec.FailurePolicy, quoted(failurePolicies))
	}
	// Expressions may read params only when the policy has a paramKind: the API server
	// declares the variable `params` in their CEL environment only then, so elsewhere it is an
	// undeclared reference.
	hasParams := spec.ParamKind != nil
	if hasParams {
		checkParamKind(&e, spec.ParamKind, fp.Child("paramKind"))
	}
	if spec.MatchConstraints == nil {
		e.add(fp.Child("matchConstraints"), "Required value")
	} else {
		checkMatchResources(&e, spec.MatchConstraints, fp.Child("matchConstraints"))
		if len(spec.MatchConstraints.ResourceRules) == 0 {
			e.add(fp.Child("matchConstraints", "resourceRules"), "Required value: at least one rule is needed, it gives the policy its types")
		}
	}

	// Match conditions are compiled without variables (as at creation), with params if the
	// policy has a paramKind.
	if len(spec.MatchConditions) > maxMatchConditions {
		e.add(fp.Child("matchConditions"), "Too many: %d: must have at most %d items", len(spec.MatchConditions), maxMatchConditions)
	}
	condNames := sets.New[string]()
	for i := range spec.MatchConditions {
		mc := &spec.MatchConditions[i]
		f := fp.Child("matchConditions").Index(i)
		if mc.Name == "" {
			e.add(f.Child("name"), "Required value")
		} else {
			for _, msg := range validation.IsQualifiedName(mc.Name) {
				e.add(f.Child("name"), "Invalid value: %q: %s", mc.Name, msg)
			}
			if condNames.Has(mc.Name) {
				e.add(f.Child("name"), "Duplicate value: %q", mc.Name)
			}
			condNames.Insert(mc.Name)
		}
		expr := strings.TrimSpace(mc.Expression)
		if expr == "" {
			e.add(f.Child("expression"), "Required value")
			continue
		}
		res := statelessCompiler(kv).CompileCELExpression(&matchconditions.MatchCondition{Expression: expr},
			plugincel.OptionalVariableDeclarations{HasParams: hasParams, HasAuthorizer: true}, environment.NewExpressions)
		if res.Error != nil {
			e.add(f.Child("expression"), "%s", res.Error.Detail)
		}
	}

	// Variables and mutations share one composited compiler when there are variables.
	var compiler plugincel.Compiler = statelessCompiler(kv)
	var composited *plugincel.CompositedCompiler
	if len(spec.Variables) > 0 {
		c, err := plugincel.NewCompositedCompiler(envSet(kv))
		if err != nil {
			e.add(fp.Child("variables"), "Internal error: %v", err)
			return e
		}
		composited, compiler = c, c
	}
	opts := plugincel.OptionalVariableDeclarations{HasParams: hasParams, HasAuthorizer: true}
	for i, v := range spec.Variables {
		f := fp.Child("variables").Index(i)
		if strings.TrimSpace(v.Name) == "" {
			e.add(f.Child("name"), "Required value: name is not specified")
		} else if !celIdent.MatchString(v.Name) || celReserved.Has(v.Name) {
			e.add(f.Child("name"), "Invalid value: %q: name is not a valid CEL identifier", v.Name)
		}
		if strings.TrimSpace(v.Expression) == "" {
			e.add(f.Child("expression"), "Required value: expression is not specified")
			continue
		}
		res := composited.CompileAndStoreVariable(&mutating.Variable{Name: v.Name, Expression: v.Expression}, opts, environment.NewExpressions)
		if res.Error != nil {
			e.add(f.Child("expression"), "%s", res.Error.Detail)
		}
	}

	if len(spec.Mutations) == 0 {
		e.add(fp.Child("mutations"), "Required value: mutations must contain at least one item")
	}
	patchOpts := opts
	patchOpts.HasPatchTypes = true
	for i := range spec.Mutations {
		m := &spec.Mutations[i]
		f := fp.Child("mutations").Index(i)
		var expr string
		var acc plugincel.ExpressionAccessor
		var exprField *field.Path
		switch m.PatchType {
		case "":
			e.add(f.Child("patchType"), "Required value: must be %s", quoted(patchTypes))
			continue
		case admissionregistrationv1.PatchTypeJSONPatch:
			if m.ApplyConfiguration != nil {
				e.add(f.Child("applyConfiguration"), "Forbidden: must not be specified when patchType is JSONPatch")
			}
			if m.JSONPatch == nil {
				e.add(f.Child("jsonPatch"), "Required value: must be specified when patchType is JSONPatch")
				continue
			}
			expr, exprField = m.JSONPatch.Expression, f.Child("jsonPatch", "expression")
			acc = &patch.JSONPatchCondition{Expression: strings.TrimSpace(expr)}
		case admissionregistrationv1.PatchTypeApplyConfiguration:
			if m.JSONPatch != nil {
				e.add(f.Child("jsonPatch"), "Forbidden: must not be specified when patchType is ApplyConfiguration")
			}
			if m.ApplyConfiguration == nil {
				e.add(f.Child("applyConfiguration"), "Required value: must be specified when patchType is ApplyConfiguration")
				continue
			}
			expr, exprField = m.ApplyConfiguration.Expression, f.Child("applyConfiguration", "expression")
			acc = &patch.ApplyConfigurationCondition{Expression: strings.TrimSpace(expr)}
		default:
			e.add(f.Child("patchType"), "Unsupported value: %q: supported values: %s", m.PatchType, quoted(patchTypes))
			continue
		}
		if strings.TrimSpace(expr) == "" {
			e.add(exprField, "Required value")
			continue
		}
		if res := compiler.CompileCELExpression(acc, patchOpts, environment.NewExpressions); res.Error != nil {
			e.add(exprField, "%s", res.Error.Detail)
		}
	}
	if spec.ReinvocationPolicy == "" {
		e.add(fp.Child("reinvocationPolicy"), "Required value: must be %s", quoted(reinvocation))
	} else if !reinvocation.Has(string(spec.ReinvocationPolicy)) {
		e.add(fp.Child("reinvocationPolicy"), "Unsupported value: %q: supported values: %s", spec.ReinvocationPolicy, quoted(reinvocation))
	}
	return e
}

// checkBinding validates a (defaulted) binding as the API server does on create.
func checkBinding(b *admissionregistrationv1.MutatingAdmissionPolicyBinding) errs {
	var e errs
	for _, msg := range genericvalidation.NameIsDNSSubdomain(b.Name, false) {
		e.add(field.NewPath("metadata", "name"), "%s", msg)
	}
	if b.Name == "" {
		e.add(field.NewPath("metadata", "name"), "Required value: name or generateName is required")
	}
	fp := field.NewPath("spec")
	if b.Spec.PolicyName == "" {
		e.add(fp.Child("policyName"), "Required value")
	} else {
		for _, msg := range genericvalidation.NameIsDNSSubdomain(b.Spec.PolicyName, false) {
			e.add(fp.Child("policyName"), "Invalid value: %q: %s", b.Spec.PolicyName, msg)
		}
	}
	if pr := b.Spec.ParamRef; pr != nil {
		f := fp.Child("paramRef")
		if pr.Name != "" {
			for _, msg := range content.IsPathSegmentName(pr.Name) {
				e.add(f.Child("name"), "Invalid value: %q: %s", pr.Name, msg)
			}
			if pr.Selector != nil {
				e.add(f.Child("name"), "Forbidden: name and selector are mutually exclusive")
			}
		}
		if pr.Selector != nil {
			e.addList(metav1validation.ValidateLabelSelector(pr.Selector, selectorValidations, f.Child("selector")))
			if pr.Name != "" {
				e.add(f.Child("selector"), "Forbidden: name and selector are mutually exclusive")
			}
		}
		if pr.Name == "" && pr.Selector == nil {
			e.add(f, "Required value: one of name or selector must be specified")
		}
		if pr.ParameterNotFoundAction == nil || *pr.ParameterNotFoundAction == "" {
			e.add(f.Child("parameterNotFoundAction"), "Required value")
		} else if !notFoundActions.Has(string(*pr.ParameterNotFoundAction)) {
			e.add(f.Child("parameterNotFoundAction"), "Unsupported value: %q: supported values: %s", *pr.ParameterNotFoundAction, quoted(notFoundActions))
		}
	}
	if b.Spec.MatchResources != nil {
		checkMatchResources(&e, b.Spec.MatchResources, fp.Child("matchResources"))
	}
	return e
}

// checkParamKind validates a policy's paramKind as the API server does: apiVersion and kind
// required, apiVersion a group (a DNS subdomain, as an APIService's) and a version (a DNS label),
// kind a DNS label but for its case.
func checkParamKind(e *errs, pk *admissionregistrationv1.ParamKind, f *field.Path) {
	if pk.APIVersion == "" {
		e.add(f.Child("apiVersion"), "Required value")
	} else if strings.Count(pk.APIVersion, "/") > 1 {
		e.add(f.Child("apiVersion"), "Invalid value: %q: unexpected GroupVersion string: %s", pk.APIVersion, pk.APIVersion)
	} else {
		group, version, found := strings.Cut(pk.APIVersion, "/")
		if !found {
			group, version = "", pk.APIVersion
		}
		if group != "" {
			if msgs := validation.IsDNS1123Subdomain(group); len(msgs) > 0 {
				e.add(f.Child("apiVersion"), "Invalid value: %q: %s", group, strings.Join(msgs, ","))
			}
		}
		if version == "" {
			e.add(f.Child("apiVersion"), "Invalid value: %q: version must be specified", pk.APIVersion)
		} else if msgs := validation.IsDNS1035Label(version); len(msgs) > 0 {
			e.add(f.Child("apiVersion"), "Invalid value: %q: %s", version, strings.Join(msgs, ","))
		}
	}
	if pk.Kind == "" {
		e.add(f.Child("kind"), "Required value")
	} else if msgs := validation.IsDNS1035Label(strings.ToLower(pk.Kind)); len(msgs) > 0 {
		e.add(f.Child("kind"), "Invalid value: %q: may have mixed case, but should otherwise match: %s", pk.Kind, strings.Join(msgs, ","))
	}
}

func checkMatchResources(e *errs, m *admissionregistrationv1.MatchResources, f *field.Path) {
	if m.MatchPolicy != nil && !matchPolicies.Has(string(*m.MatchPolicy)) {
		e.add(f.Child("matchPolicy"), "Unsupported value: %q: supported values: %s", *m.MatchPolicy, quoted(matchPolicies))
	}
	if m.NamespaceSelector != nil {
		e.addList(metav1validation.ValidateLabelSelector(m.NamespaceSelector, selectorValidations, f.Child("namespaceSelector")))
	}
	if m.ObjectSelector != nil {
		e.addList(metav1validation.ValidateLabelSelector(m.ObjectSelector, selectorValidations, f.Child("objectSelector")))
	}
	for name, rules := range map[string][]admissionregistrationv1.NamedRuleWithOperations{"resourceRules": m.ResourceRules, "excludeResourceRules": m.ExcludeResourceRules} {
		for i := range rules {
			checkRule(e, &rules[i], f.Child(name).Index(i))
		}
	}
}

func checkRule(e *errs, r *admissionregistrationv1.NamedRuleWithOperations, f *field.Path) {
	if len(r.Operations) == 0 {
		e.add(f.Child("operations"), "Required value")
	}
	for i, op := range r.Operations {
		if !operations.Has(string(op)) {
			e.add(f.Child("operations").Index(i), "Unsupported value: %q: supported values: %s", op, quoted(operations))
		}
	}
	if len(r.Operations) > 1 && hasWildcard(r.Operations) {
		e.add(f.Child("operations"), "Invalid value: if '*' is present, must not specify other operations")
	}
	if len(r.APIGroups) == 0 {
		e.add(f.Child("apiGroups"), "Required value")
	}
	if len(r.APIGroups) > 1 && hasWildcard(r.APIGroups) {
		e.add(f.Child("apiGroups"), "Invalid value: if '*' is present, must not specify other API groups")
	}
	if len(r.APIVersions) == 0 {
		e.add(f.Child("apiVersions"), "Required value")
	}
	if len(r.APIVersions) > 1 && hasWildcard(r.APIVersions) {
		e.add(f.Child("apiVersions"), "Invalid value: if '*' is present, must not specify other API versions")
	}
	for i, v := range r.APIVersions {
		if v == "" {
			e.add(f.Child("apiVersions").Index(i), "Required value")
		}
	}
	if len(r.Resources) == 0 {
		e.add(f.Child("resources"), "Required value")
	}
	single, plain, double := false, false, false
	for i, res := range r.Resources {
		switch {
		case res == "":
			e.add(f.Child("resources").Index(i), "Required value")
		case res == "*":
			single = true
		case res == "*/*":
			double = true
		case !strings.Contains(res, "/"):
			plain = true
		}
	}
	if double && len(r.Resources) > 1 {
		e.add(f.Child("resources"), "Invalid value: if '*/*' is present, must not specify other resources")
	}
	if single && plain {
		e.add(f.Child("resources"), "Invalid value: if '*' is present, must not specify other resources without subresources")
	}
	if r.Scope != nil && !scopes.Has(string(*r.Scope)) {
		e.add(f.Child("scope"), "Unsupported value: %q: supported values: %s", *r.Scope, quoted(scopes))
	}
	for i, n := range r.ResourceNames {
		if n == "" || strings.Contains(n, "/") || strings.Contains(n, "%") || n == "." || n == ".." {
			e.add(f.Child("resourceNames").Index(i), "Invalid value: %q: not a valid resource name", n)
		}
	}
}

func hasWildcard[S ~string](s []S) bool {
	for _, x := range s {
		if x == "*" {
			return true
		}
	}
	return false
}

func quoted(s sets.Set[string]) string {
	l := sets.List(s)
	for i := range l {
		l[i] = fmt.Sprintf("%q", l[i])
	}
	return strings.Join(l, ", ")
}
