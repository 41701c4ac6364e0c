package gatekeeper

import (
	"fmt"
	"sort"
	"strings"

	"github.com/open-policy-agent/gatekeeper/v3/apis/mutations/unversioned"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/mutation/match"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/mutation/mutators/core"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/mutation/path/parser"
	patht "github.com/open-policy-agent/gatekeeper/v3/pkg/mutation/path/tester"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/mutation/types"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mapc-dev/mapc/compiler/gatekeeper/ir"
)

// Lower turns a decoded mutator into the IR. It returns (nil, nil, reason) for a mutator that can
// never act on an admission request (so nothing is emitted), and an error for one that cannot be
// translated exactly.
func Lower(src ir.Source, d *Decoded) (*ir.Mutation, string, error) {
	id := d.Mutator.ID()
	m := &ir.Mutation{
		Source:  src,
		SortKey: sortKey(id),
	}
	var gkMatch *match.Match
	var applyTo []match.MutationApplyTo
	var pathTests []unversioned.PathTest
	var tester *patht.Tester
	path := d.Mutator.Path()
	if len(path.Nodes) == 0 {
		// Gatekeeper accepts a ModifySet without a location, then fails every request it
		// matches ("attempting to mutate an empty target location").
		return nil, "", &FieldError{Field: "spec.location", Msg: "is empty: Gatekeeper accepts the mutator but fails every request it matches"}
	}
	var err error
	switch o := d.Object.(type) {
	case *unversioned.Assign:
		gkMatch, applyTo, pathTests = &o.Spec.Match, o.Spec.ApplyTo, o.Spec.Parameters.PathTests
		op, err := assignOp(o.Spec.Parameters.Assign)
		if err != nil {
			return nil, "", err
		}
		m.Op = op
	case *unversioned.AssignMetadata:
		gkMatch = &o.Spec.Match
		op, err := assignOp(o.Spec.Parameters.Assign)
		if err != nil {
			return nil, "", err
		}
		m.Op = op
		// AssignMetadata never changes an existing key: Gatekeeper tests MustNotExist on the
		// whole location.
		tester, err = patht.New(path, []patht.Test{{SubPath: path, Condition: patht.MustNotExist}})
		if err != nil {
			return nil, "", &FieldError{Field: "spec.location", Msg: err.Error()}
		}
	case *unversioned.ModifySet:
		gkMatch, applyTo, pathTests = &o.Spec.Match, o.Spec.ApplyTo, o.Spec.Parameters.PathTests
		switch o.Spec.Parameters.Operation {
		case unversioned.MergeOp:
			m.Op = ir.MergeSet{Values: o.Spec.Parameters.Values.FromList}
		case unversioned.PruneOp:
			m.Op = ir.PruneSet{Values: o.Spec.Parameters.Values.FromList}
		default:
			return nil, "", &FieldError{Field: "spec.parameters.operation", Msg: fmt.Sprintf("%q is not merge or prune", o.Spec.Parameters.Operation)}
		}
	case *unversioned.AssignImage:
		gkMatch, applyTo, pathTests = &o.Spec.Match, o.Spec.ApplyTo, o.Spec.Parameters.PathTests
		p := o.Spec.Parameters
		m.Op = ir.RewriteImage{Domain: p.AssignDomain, Path: p.AssignPath, Tag: p.AssignTag}
	default:
		return nil, "", fmt.Errorf("unsupported type %T", d.Object)
	}
	if tester == nil {
		tester, err = core.NewTester(id.Name, id.Kind, path, pathTests)
		if err != nil {
			return nil, "", &FieldError{Field: "spec.parameters.pathTests", Msg: err.Error()}
		}
	}
	for i, n := range path.Nodes {
		switch n := n.(type) {
		case *parser.Object:
			m.Path = append(m.Path, ir.Step{Field: n.Reference})
		case *parser.List:
			st := ir.Step{List: true, KeyField: n.KeyField, Glob: n.Glob}
			if !n.Glob {
				s, ok := n.KeyValue.(string)
				if !ok {
					return nil, "", &FieldError{Field: "spec.location", Msg: fmt.Sprintf("key value %v of list element %d is not a string", n.KeyValue, i)}
				}
				st.KeyValue = s
			}
			m.Path = append(m.Path, st)
		default:
			return nil, "", &FieldError{Field: "spec.location", Msg: fmt.Sprintf("unknown path node %T", n)}
		}
		m.ExistsOK = append(m.ExistsOK, tester.ExistsOkay(i))
		m.MissingOK = append(m.MissingOK, tester.MissingOkay(i))
	}
	reason, err := lowerMatch(&m.Match, gkMatch, applyTo, d.Object)
	if err != nil || reason != "" {
		return nil, reason, err
	}
	return m, "", nil
}

func assignOp(a unversioned.AssignField) (ir.Op, error) {
	if a.ExternalData != nil {
		return nil, &FieldError{Field: "spec.parameters.assign.externalData", Msg: "externalData calls an external provider at admission time; a MutatingAdmissionPolicy cannot call out, so it has no equivalent"}
	}
	if a.FromMetadata != nil {
		return ir.SetValue{FromMetadata: string(a.FromMetadata.Field)}, nil
	}
	if a.Value == nil {
		return nil, &FieldError{Field: "spec.parameters.assign", Msg: "no value"}
	}
	return ir.SetValue{Value: a.Value.GetValue()}, nil
}

// sortKey orders as Gatekeeper's orderedMutators do: by group, kind, namespace, name.
func sortKey(id types.ID) string {
	return strings.Join([]string{id.Group, id.Kind, id.Namespace, id.Name}, "\x00")
}

var allOperations = []string{"CREATE", "UPDATE"}

func lowerMatch(out *ir.Match, m *match.Match, applyTo []match.MutationApplyTo, obj any) (string, error) {
	// Gatekeeper checks the selectors before the source: an invalid one fails every request.
	for _, sel := range []struct {
		s     *metav1.LabelSelector
		field string
	}{{m.LabelSelector, "spec.match.labelSelector"}, {m.NamespaceSelector, "spec.match.namespaceSelector"}} {
		if sel.s == nil {
			continue
		}
		if _, err := metav1.LabelSelectorAsSelector(sel.s); err != nil {
			return "", &FieldError{Field: sel.field, Msg: "Gatekeeper fails every request this mutator sees with this selector: " + err.Error()}
		}
	}
	switch types.SourceType(m.Source) {
	case "", types.SourceTypeAll, types.SourceTypeOriginal:
	case types.SourceTypeGenerated:
		return "match.source is Generated: it applies only to resources Gatekeeper's expansion generates, never to admission requests", nil
	default:
		return "", &FieldError{Field: "spec.match.source", Msg: fmt.Sprintf("%q is not All, Original or Generated", m.Source)}
	}
	switch m.Scope {
	case "", "*":
	case "Namespaced", "Cluster":
		out.Scope = string(m.Scope)
	default:
		msg := fmt.Sprintf("%q is not Namespaced, Cluster or *", m.Scope)
		if c, ok := closest(string(m.Scope), []string{"Namespaced", "Cluster"}); ok {
			msg += "; did you mean " + c + "?"
		}
		return "", &FieldError{Field: "spec.match.scope", Msg: msg + " Gatekeeper's CRD lets any value through and Gatekeeper then matches every scope: write the scope meant, or * for every scope"}
	}
	for _, n := range m.Namespaces {
		out.Namespaces = append(out.Namespaces, string(n))
	}
	for _, n := range m.ExcludedNamespaces {
		out.ExcludedNamespaces = append(out.ExcludedNamespaces, string(n))
	}
	out.Name = string(m.Name)
	out.LabelSelector = m.LabelSelector
	out.NamespaceSelector = m.NamespaceSelector
	kindOK := func(group, kind string) bool {
		if len(m.Kinds) == 0 {
			return true
		}
		for _, kk := range m.Kinds {
			km := len(kk.Kinds) == 0 || contains(kk.Kinds, "*") || contains(kk.Kinds, kind)
			gm := len(kk.APIGroups) == 0 || contains(kk.APIGroups, "*") || contains(kk.APIGroups, group)
			if km && gm {
				return true
			}
		}
		return false
	}
	if _, ok := obj.(*unversioned.AssignMetadata); ok {
		// AssignMetadata has no applyTo: it applies to every kind that match.kinds allows.
		out.Operations = allOperations
		for _, kk := range m.Kinds {
			out.Kinds = append(out.Kinds, ir.GroupKinds{Groups: kk.APIGroups, Kinds: kk.Kinds})
		}
		return "", nil
	}
	seen := map[string]bool{}
	for _, a := range applyTo {
		ops := []string{}
		for _, op := range allOperations {
			if a.MatchesOperation(admissionOp(op)) {
				ops = append(ops, op)
			}
		}
		if len(ops) == 0 {
			continue
		}
		for _, gvk := range a.Flatten() {
			if !kindOK(gvk.Group, gvk.Kind) || strings.Contains(gvk.Group+gvk.Version+gvk.Kind, "*") {
				// Gatekeeper compares applyTo literally: "*" is not a wildcard there.
				continue
			}
			key := gvk.String() + "/" + strings.Join(ops, ",")
			if seen[key] {
				continue
			}
			seen[key] = true
			out.Rules = append(out.Rules, ir.Rule{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind, Operations: ops})
		}
	}
	sort.Slice(out.Rules, func(i, j int) bool {
		a, b := out.Rules[i], out.Rules[j]
		return a.Group+"/"+a.Version+"/"+a.Kind+"/"+strings.Join(a.Operations, ",") < b.Group+"/"+b.Version+"/"+b.Kind+"/"+strings.Join(b.Operations, ",")
	})
	if len(out.Rules) == 0 {
		return "no applyTo entry names a kind that match.kinds also allows with CREATE or UPDATE (Gatekeeper compares applyTo literally: \"*\" matches nothing there), so Gatekeeper never applies it", nil
	}
	return "", nil
}

func contains(set []string, s string) bool {
	for _, x := range set {
		if x == s {
			return true
		}
	}
	return false
}

func admissionOp(op string) admissionv1.Operation { return admissionv1.Operation(op) }
