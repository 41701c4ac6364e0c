package suite

import (
	"context"
	"fmt"
	"slices"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/mapc-dev/mapc/cel/admission"
	"github.com/mapc-dev/mapc/compiler/kyverno"
	"github.com/mapc-dev/mapc/emit"
	"github.com/mapc-dev/mapc/verify"
)

// kyvernoSets maps each Kyverno policy ("name", or "namespace/name" for a Policy) to the policy
// compiled from it, which names it in its mapc.dev/source annotation.
func kyvernoSets(sets []admission.PolicySet) map[string]admission.PolicySet {
	out := map[string]admission.PolicySet{}
	for _, s := range sets {
		for _, src := range emit.ParseSources(s.Policy.GetAnnotations()[emit.AnnotationSource]) {
			if !strings.HasPrefix(src.APIVersion, kyverno.Group+"/") {
				continue
			}
			id := src.Name
			if src.Kind == "Policy" {
				id = src.Namespace + "/" + src.Name
			}
			out[id] = s
		}
	}
	return out
}

// runKyverno runs a result for a Kyverno policy as kyverno test does, through the compiled
// policies: the object goes through the policies compiled from the Kyverno policies kyverno test
// applies before (each alone, in its order), then through the one compiled from the result's
// policy, alone. It returns the result, or why the case cannot be judged on the object (a skip).
//
// Kyverno reports a mutate rule that changes the object as pass, one that matches and changes
// nothing as skip, and one that fails as error; kyverno test passes any result for a resource no
// rule of the policy matches (excluded). On the object, "changed" and "failed" are visible, but
// not which rule changed it (unless a patched resource shows what every rule does), nor whether
// an unchanged object was matched: those results are skipped with the reason.
func (r *runner) runKyverno(ctx context.Context, c *Case) (verify.Result, string) {
	k := c.Kyverno
	ev := r.ev
	res := verify.Result{Case: c.Name}
	target, compiled := r.kyverno[k.Policy]
	var chain []admission.PolicySet
	for _, id := range k.Before {
		if s, ok := r.kyverno[id]; ok {
			chain = append(chain, s)
		}
	}
	all := chain
	if compiled {
		all = append(slices.Clip(chain), target)
	}
	in, err := verify.Normalize(c.Object)
	if err != nil {
		res.Reason = "the object is not valid: " + err.Error()
		return res, ""
	}
	req := admission.Request{Object: in, Operation: c.Operation, UserName: c.User}
	if req.Operation == "" {
		req.Operation = admissionv1.Create
	}
	admit := func(sets []admission.PolicySet, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
		rq := req
		rq.Object = obj.DeepCopy()
		if rq.Operation == admissionv1.Update {
			// As kyverno test sends an UPDATE: the old object is the object the policy sees.
			rq.OldObject = obj.DeepCopy()
		}
		tr := &admission.Trace{}
		got, gerr := ev.Admit(admission.WithTrace(ctx, tr), sets, rq)
		if gerr == nil {
			got, gerr = verify.Normalize(got)
		}
		r.notes.Merge(tr)
		for _, f := range tr.Ignored() {
			if !slices.Contains(res.Ignored, f.String()) {
				res.Ignored = append(res.Ignored, f.String())
			}
		}
		return got, gerr
	}
	// The object as the API server sees it before any policy (decoded, in its namespace).
	base, err := admit(nil, in)
	if err != nil {
		res.Reason = "the object cannot be admitted: " + err.Error()
		return res, ""
	}
	if err := r.checkNamespace(ctx, all, base, req); err != nil {
		res.Reason = err.Error()
		return res, ""
	}
	obj := base
	for _, s := range chain {
		res.Order = append(res.Order, s.Policy.Name)
		got, gerr := admit([]admission.PolicySet{s}, obj)
		if gerr != nil {
			res.Reason = fmt.Sprintf("%s, which kyverno test applies to the object before %s, fails", s.Policy.Name, k.Policy)
			res.GotErr = gerr.Error()
			return res, ""
		}
		obj = got
	}
	res.Orders = 1
	got, gerr := obj, error(nil)
	if compiled {
		// Without a compiled policy, no rule of the Kyverno policy can change the object: the
		// compiler left it out and said so.
		res.Order = append(res.Order, target.Policy.Name)
		got, gerr = admit([]admission.PolicySet{target}, obj)
	}
	var want *unstructured.Unstructured
	if c.Expect != nil {
		if want, err = verify.Normalize(c.Expect); err != nil {
			res.Reason = "the expected object is not valid: " + err.Error()
			return res, ""
		}
		if want.GetNamespace() == "" && c.Object.GetNamespace() == "" {
			// Neither names a namespace: the request goes to the default namespace, as kubectl's.
			want.SetNamespace(base.GetNamespace())
		}
	}
	res.Want, res.Got = want, got
	switch k.Result {
	case "fail", "error":
		res.WantErr = "an error (Kyverno's result " + k.Result + ")"
		if gerr == nil {
			res.Reason = "admitted, but Kyverno's result " + k.Result + " was expected"
			if want != nil {
				res.Diff = Diff(tidied(want), tidied(got))
			}
			return res, ""
		}
		res.Pass = true
		return res, ""
	}
	if gerr != nil {
		res.Reason = "the compiled policy fails"
		res.GotErr = gerr.Error()
		return res, ""
	}
	// kyverno test compares the patched resource first, whatever the result.
	if want != nil && !apiequality.Semantic.DeepEqual(tidied(want).Object, tidied(got).Object) {
		res.Reason = "the compiled policy's result differs from the patched resource (nulls, empty maps and lists aside, as kyverno test compares)"
		res.Diff = Diff(tidied(want), tidied(got))
		return res, ""
	}
	changed := !apiequality.Semantic.DeepEqual(obj.Object, got.Object)
	what := k.Policy
	if k.Rule != "" {
		what = "rule " + k.Rule + " of " + k.Policy
	}
	switch k.Result {
	case "pass":
		if !changed {
			return res, fmt.Sprintf("the compiled policy leaves the object unchanged: Kyverno reports a matching rule that changes nothing as skip, which fails result pass, but kyverno test passes it when no rule of %s matches the object (excluded); the object does not tell these apart", k.Policy)
		}
		if k.Rules > 1 && want == nil {
			// With a patched resource, what every rule does to the object is checked.
			return res, fmt.Sprintf("the compiled policy changes the object, but %s has %d mutate rules and, without patchedResources, the object does not tell whether %s changed it", k.Policy, k.Rules, ruleOrRules(k))
		}
	case "skip":
		if changed {
			if k.Rules > 1 {
				return res, fmt.Sprintf("the compiled policy changes the object, but %s has %d mutate rules and the object does not tell whether %s changed nothing", k.Policy, k.Rules, what)
			}
			res.Reason = fmt.Sprintf("the compiled policy changes the object: Kyverno's result skip (%s changes nothing) was expected", what)
			res.Want = obj
			res.Diff = Diff(tidied(obj), tidied(got))
			return res, ""
		}
	}
	res.Pass = true
	return res, ""
}

// ruleOrRules names what a result is about: its rule, or every rule of its policy.
func ruleOrRules(k *KyvernoResult) string {
	if k.Rule != "" {
		return "rule " + k.Rule
	}
	return "each rule that matches"
}
