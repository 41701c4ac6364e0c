package bench

import (
	"context"
	"fmt"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apiserver/pkg/admission"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/mutating/patch"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/client-go/applyconfigurations"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	mapcadmission "github.com/mapc-dev/mapc/cel/admission"
)

// CostMeter measures the CEL runtime cost of admitting an object through MutatingAdmissionPolicies:
// the cost each expression (match conditions, variables, mutations) takes from its budget, as
// the API server's own CEL evaluators (k8s.io/apiserver plugin/cel ForInput) count it, summed
// over every expression that runs.
//
// It runs the policies in the given order the way the MAP dispatcher does — match conditions,
// then each mutation through the API server's JSONPatch and ApplyConfiguration patchers, the
// object updated after each — but the request matching (rules, selectors) is a simple
// re-implementation for the bench objects, and there is no reinvocation (every policy here is
// reinvocationPolicy: Never). Callers check that it ends with the object the real plugin
// (package cel/admission) stores.
type CostMeter struct {
	objIfaces admission.ObjectInterfaces
	tc        managedfields.TypeConverter
	ns        map[string]*corev1.Namespace
	authz     authorizer.Authorizer
	policies  map[*admissionregistrationv1.MutatingAdmissionPolicy]*meteredPolicy
}

type meteredPolicy struct {
	compiler   *plugincel.CompositedCompiler
	conditions plugincel.ConditionEvaluator
	patchers   []patch.Patcher
	meters     []*meteredEvaluator
}

// meteredEvaluator records what each evaluation took from its budget.
type meteredEvaluator struct {
	plugincel.MutatingEvaluator
	cost int64
}

func (m *meteredEvaluator) ForInput(ctx context.Context, va *admission.VersionedAttributes, req *admissionv1.AdmissionRequest, in plugincel.OptionalVariableBindings, ns *corev1.Namespace, budget int64) (plugincel.EvaluationResult, int64, error) {
	res, remaining, err := m.MutatingEvaluator.ForInput(ctx, va, req, in, ns, budget)
	if err == nil && remaining >= 0 {
		m.cost = budget - remaining
	}
	return res, remaining, err
}

// NewCostMeter builds a meter that looks namespaces up among nss (others exist with only their
// kubernetes.io/metadata.name label).
func NewCostMeter(nss []*corev1.Namespace) *CostMeter {
	m := &CostMeter{
		objIfaces: admission.NewObjectInterfacesFromScheme(clientgoscheme.Scheme),
		tc:        applyconfigurations.NewTypeConverter(clientgoscheme.Scheme),
		ns:        map[string]*corev1.Namespace{},
		authz:     authorizerfactory.NewAlwaysAllowAuthorizer(),
		policies:  map[*admissionregistrationv1.MutatingAdmissionPolicy]*meteredPolicy{},
	}
	for _, ns := range nss {
		ns = ns.DeepCopy()
		if ns.Labels == nil {
			ns.Labels = map[string]string{}
		}
		ns.Labels[corev1.LabelMetadataName] = ns.Name
		m.ns[ns.Name] = ns
	}
	return m
}

// compile compiles a policy as the API server does (cel/admission's copy of compilePolicy), with
// each mutation's evaluator metered.
func (m *CostMeter) compile(p *admissionregistrationv1.MutatingAdmissionPolicy) (*meteredPolicy, error) {
	if mp, ok := m.policies[p]; ok {
		return mp, nil
	}
	c, err := plugincel.NewCompositedCompiler(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()))
	if err != nil {
		return nil, err
	}
	opts := plugincel.OptionalVariableDeclarations{HasParams: p.Spec.ParamKind != nil, HasAuthorizer: true}
	var vars []plugincel.NamedExpressionAccessor
	for _, v := range p.Spec.Variables {
		vars = append(vars, &validating.Variable{Name: v.Name, Expression: v.Expression})
	}
	c.CompileAndStoreVariables(vars, opts, environment.StoredExpressions)
	mp := &meteredPolicy{compiler: c}
	if len(p.Spec.MatchConditions) > 0 {
		accs := make([]plugincel.ExpressionAccessor, len(p.Spec.MatchConditions))
		for i := range p.Spec.MatchConditions {
			accs[i] = (*matchconditions.MatchCondition)(&p.Spec.MatchConditions[i])
		}
		mp.conditions = c.CompileCondition(accs, opts, environment.StoredExpressions)
	}
	popts := opts
	popts.HasPatchTypes = true
	for _, mu := range p.Spec.Mutations {
		var acc plugincel.ExpressionAccessor
		switch {
		case mu.PatchType == admissionregistrationv1.PatchTypeJSONPatch && mu.JSONPatch != nil:
			acc = &patch.JSONPatchCondition{Expression: mu.JSONPatch.Expression}
		case mu.PatchType == admissionregistrationv1.PatchTypeApplyConfiguration && mu.ApplyConfiguration != nil:
			acc = &patch.ApplyConfigurationCondition{Expression: mu.ApplyConfiguration.Expression}
		default:
			return nil, fmt.Errorf("policy %s: mutation without expression", p.Name)
		}
		ev := &meteredEvaluator{MutatingEvaluator: c.CompileMutatingEvaluator(acc, popts, environment.StoredExpressions)}
		if errs := ev.CompilationErrors(); len(errs) > 0 {
			return nil, fmt.Errorf("policy %s: %v", p.Name, errs)
		}
		mp.meters = append(mp.meters, ev)
		if mu.PatchType == admissionregistrationv1.PatchTypeJSONPatch {
			mp.patchers = append(mp.patchers, patch.NewJSONPatcher(ev))
		} else {
			mp.patchers = append(mp.patchers, patch.NewApplyConfigurationPatcher(ev))
		}
	}
	m.policies[p] = mp
	return mp, nil
}

// Cost is what admitting one object took.
type Cost struct {
	CEL         int64 // runtime cost units, summed
	Expressions int   // expressions evaluated (a list of match conditions counts once)
	Mutations   int   // mutations applied
}

// Run admits obj (a built-in kind) through sets in order and returns the cost and the object.
func (m *CostMeter) Run(ctx context.Context, sets []mapcadmission.PolicySet, obj *unstructured.Unstructured) (Cost, *unstructured.Unstructured, error) {
	var cost Cost
	gvk := obj.GroupVersionKind()
	typed, err := clientgoscheme.Scheme.New(gvk)
	if err != nil {
		return cost, nil, err
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, typed); err != nil {
		return cost, nil, err
	}
	typed.GetObjectKind().SetGroupVersionKind(gvk)
	gvr := resourceOf(gvk)
	nsName := obj.GetNamespace()
	var ns *corev1.Namespace
	if nsName != "" {
		if ns = m.ns[nsName]; ns == nil {
			ns = &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: nsName, Labels: map[string]string{corev1.LabelMetadataName: nsName}}}
		}
	}
	attrs := admission.NewAttributesRecord(typed, nil, gvk, nsName, obj.GetName(), gvr, "", admission.Create, &metav1.CreateOptions{}, false,
		&user.DefaultInfo{Name: "mapc", Groups: []string{user.AllAuthenticated}})
	va, err := admission.NewVersionedAttributes(attrs, gvk, m.objIfaces)
	if err != nil {
		return cost, nil, err
	}
	for _, set := range sets {
		if !m.matches(set, va, ns) {
			continue
		}
		mp, err := m.compile(set.Policy)
		if err != nil {
			return cost, nil, err
		}
		pctx := mp.compiler.CreateContext(ctx)
		vars := plugincel.OptionalVariableBindings{Authorizer: m.authz}
		if mp.conditions != nil {
			req := plugincel.CreateAdmissionRequest(va.Attributes, metav1.GroupVersionResource(gvr), metav1.GroupVersionKind(gvk))
			rs, remaining, err := mp.conditions.ForInput(pctx, va, req, vars, nil, celconfig.RuntimeCELCostBudgetMatchConditions)
			if err != nil {
				return cost, nil, fmt.Errorf("policy %s: match conditions: %w", set.Policy.Name, err)
			}
			cost.CEL += celconfig.RuntimeCELCostBudgetMatchConditions - remaining
			cost.Expressions += len(rs)
			ok := true
			for _, r := range rs {
				if r.Error != nil {
					return cost, nil, fmt.Errorf("policy %s: match condition: %w", set.Policy.Name, r.Error)
				}
				if b, isBool := r.EvalResult.Value().(bool); !isBool || !b {
					ok = false
				}
			}
			if !ok {
				continue
			}
		}
		for i, p := range mp.patchers {
			out, err := p.Patch(pctx, patch.Request{
				MatchedResource:     gvr,
				VersionedAttributes: va,
				ObjectInterfaces:    m.objIfaces,
				OptionalVariables:   vars,
				Namespace:           ns,
				TypeConverter:       m.tc,
			}, celconfig.RuntimeCELCostBudget)
			if err != nil {
				return cost, nil, fmt.Errorf("policy %s: mutation %d: %w", set.Policy.Name, i, err)
			}
			cost.CEL += mp.meters[i].cost
			cost.Expressions++
			cost.Mutations++
			if _, isU := out.(*unstructured.Unstructured); isU {
				if out, err = m.objIfaces.GetObjectConvertor().ConvertToVersion(out, gvk.GroupVersion()); err != nil {
					return cost, nil, err
				}
			}
			va.UpdateObject(out)
		}
	}
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(va.VersionedObject.Object())
	if err != nil {
		return cost, nil, err
	}
	u := &unstructured.Unstructured{Object: content}
	u.SetGroupVersionKind(gvk)
	return cost, u, nil
}

// matches is the request matching of the dispatcher for a CREATE: the policy's matchConstraints
// and one of its bindings' matchResources (resource rules, namespace and object selectors).
func (m *CostMeter) matches(set mapcadmission.PolicySet, va *admission.VersionedAttributes, ns *corev1.Namespace) bool {
	if !matchResources(set.Policy.Spec.MatchConstraints, va, ns) {
		return false
	}
	for _, b := range set.Bindings {
		if b.Spec.MatchResources == nil || matchResources(b.Spec.MatchResources, va, ns) {
			return true
		}
	}
	return false
}

func matchResources(mr *admissionregistrationv1.MatchResources, va *admission.VersionedAttributes, ns *corev1.Namespace) bool {
	if mr == nil {
		return true
	}
	obj, err := metaLabels(va.VersionedObject.Object())
	if err != nil {
		return false
	}
	if !selects(mr.ObjectSelector, obj) {
		return false
	}
	if ns != nil && !selects(mr.NamespaceSelector, ns.Labels) {
		return false
	}
	gvr, namespaced := va.GetResource(), ns != nil
	inRules := func(rules []admissionregistrationv1.NamedRuleWithOperations) bool {
		for _, r := range rules {
			if has(r.Operations, string(admissionregistrationv1.Create)) && has(r.APIGroups, gvr.Group) && has(r.APIVersions, gvr.Version) &&
				has(r.Resources, gvr.Resource) && (r.Scope == nil || *r.Scope == admissionregistrationv1.AllScopes ||
				(*r.Scope == admissionregistrationv1.NamespacedScope) == namespaced) {
				return true
			}
		}
		return false
	}
	return (len(mr.ResourceRules) == 0 || inRules(mr.ResourceRules)) && !inRules(mr.ExcludeResourceRules)
}

func has[T ~string](list []T, x string) bool {
	for _, e := range list {
		if string(e) == x || e == "*" {
			return true
		}
	}
	return false
}

func selects(sel *metav1.LabelSelector, lbls map[string]string) bool {
	if sel == nil {
		return true
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return false
	}
	return s.Matches(labels.Set(lbls))
}

func metaLabels(obj runtime.Object) (map[string]string, error) {
	a, ok := obj.(metav1.Object)
	if !ok {
		return nil, fmt.Errorf("%T has no metadata", obj)
	}
	return a.GetLabels(), nil
}

// resourceOf maps the bench objects' kinds to their resources.
func resourceOf(gvk schema.GroupVersionKind) schema.GroupVersionResource {
	plural := map[string]string{"Pod": "pods", "Deployment": "deployments", "Namespace": "namespaces"}[gvk.Kind]
	return gvk.GroupVersion().WithResource(plural)
}
