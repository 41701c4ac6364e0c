package compiler

import (
	"github.com/mapc-dev/mapc/compiler/source"
)

// Documents are input documents told apart as every command tells them: each language's own
// (its input policies, documents meant as such, its installation), the other documents of an
// engine's API groups, ready MutatingAdmissionPolicies and bindings, and the rest: the objects
// to admit.
type Documents struct {
	// Inputs are the documents each route claims, by the name of its input policies
	// (route.Route.Input: "Gatekeeper mutator", "Kyverno policy"), in input order.
	Inputs map[string][]*source.Document
	// Languages names the routes that claimed documents, in the order of the routes.
	Languages []string
	// Related are the documents of an engine's API groups that no route claims (Gatekeeper's
	// constraints, Kyverno's CLI files), which are neither input policies nor objects.
	Related []*source.Document
	// Policies are MutatingAdmissionPolicies and bindings.
	Policies []*source.Document
	// Objects are all the others.
	Objects []*source.Document

	all []*source.Document
}

// All are every language's input documents, in input order.
func (d *Documents) All() []*source.Document { return d.all }

// Sort tells docs apart.
func Sort(docs []*source.Document) *Documents {
	out := &Documents{Inputs: map[string][]*source.Document{}}
	for _, d := range docs {
		claimed := false
		for _, r := range routes {
			if r.Claims(d) {
				if out.Inputs[r.Input()] == nil {
					out.Languages = append(out.Languages, r.Input())
				}
				out.Inputs[r.Input()] = append(out.Inputs[r.Input()], d)
				out.all = append(out.all, d)
				claimed = true
				break
			}
		}
		if claimed {
			continue
		}
		related := false
		for _, r := range routes {
			related = related || r.Related(d)
		}
		gvk := d.Object.GroupVersionKind()
		switch {
		case related:
			out.Related = append(out.Related, d)
		case gvk.Group == "admissionregistration.k8s.io" && (gvk.Kind == "MutatingAdmissionPolicy" || gvk.Kind == "MutatingAdmissionPolicyBinding"):
			out.Policies = append(out.Policies, d)
		default:
			out.Objects = append(out.Objects, d)
		}
	}
	// Languages in the order of the routes, whatever the order of the documents.
	var langs []string
	for _, r := range routes {
		if out.Inputs[r.Input()] != nil {
			langs = append(langs, r.Input())
		}
	}
	out.Languages = langs
	return out
}
