// Package gatekeeper is the front end for Gatekeeper mutators (mutations.gatekeeper.sh v1,
// v1beta1, v1alpha1: Assign, AssignMetadata, ModifySet, AssignImage). It checks each mutator
// against Gatekeeper's CRDs as the API server does with strict field validation (unknown fields,
// types, enums, required fields), decodes and validates it with Gatekeeper's own types, parser
// and constructors, and lowers it into the IR. A document that misspells a mutator's group or
// kind is refused, not ignored.
//
// It also reads the installation being replaced (install.go: Gatekeeper's Config and the
// namespaces its webhook skips).
//
// It must not approximate: a mutator whose behaviour in Gatekeeper's engine cannot be expressed
// exactly is refused with the reason. It must not import another language's packages.
package gatekeeper

import (
	"fmt"
	"sort"
	"strings"

	"github.com/open-policy-agent/gatekeeper/v3/pkg/mutation/schema"

	"github.com/mapc-dev/mapc/compiler/diag"
	"github.com/mapc-dev/mapc/compiler/gatekeeper/ir"
	"github.com/mapc-dev/mapc/compiler/source"
	"github.com/mapc-dev/mapc/internal/par"
)

// Problem is a refusal or rejection of one mutator, positioned.
type Problem = diag.Problem

// Result is what the front end made of a set of documents.
type Result struct {
	Mutations []*ir.Mutation
	// Notes say which documents were ignored and why (not mutators; mutators that never apply).
	Notes []diag.Note
	// Problems are the mutators that were refused or rejected, and the documents meant as
	// mutators that the API server would not take for one (misspelt group or kind).
	Problems []*Problem
}

type decodeResult struct {
	d   *Decoded
	err error
}

// decodeAll decodes every named mutator among docs, on every core: decoding (Gatekeeper's
// types, conversion and location parser) is most of the front end's time, and each document is
// decoded on its own. Compile uses the results in order.
func decodeAll(docs []*source.Document) []decodeResult {
	out := make([]decodeResult, len(docs))
	par.Do(len(docs), func(i int) {
		if obj := docs[i].Object; IsMutator(obj) && obj.GetName() != "" {
			out[i].d, out[i].err = Decode(obj)
		}
	})
	return out
}

// Compile lowers every Gatekeeper mutator among docs. Other documents are noted and skipped.
// Mutations come back in Gatekeeper's order (sorted by group, kind, namespace, name).
func Compile(docs []*source.Document) *Result {
	res := &Result{}
	seen := map[string]*source.Document{}
	db := schema.New()
	type decoded struct {
		doc *source.Document
		d   *Decoded
		m   *ir.Mutation
	}
	var all []decoded
	pre := decodeAll(docs)
	for i, doc := range docs {
		obj := doc.Object
		if field, msg := Misnamed(obj); msg != "" {
			res.Problems = append(res.Problems, &Problem{File: doc.File, Line: doc.LineOf(field), Object: obj.GetKind() + "/" + obj.GetName(), Field: field, Msg: msg})
			continue
		}
		if !IsMutator(obj) {
			res.Notes = append(res.Notes, diag.Note{Kind: diag.Ignored, File: doc.File, Line: doc.Line,
				Msg: fmt.Sprintf("%s %s/%s is not a Gatekeeper mutator; ignored", obj.GetAPIVersion(), obj.GetKind(), obj.GetName())})
			continue
		}
		name := obj.GetKind() + "/" + obj.GetName()
		src := ir.Source{File: doc.File, Line: doc.Line, APIVersion: obj.GetAPIVersion(), Kind: obj.GetKind(), Namespace: obj.GetNamespace(), Name: obj.GetName()}
		problem := func(field, msg string) {
			line := doc.Line
			if field != "" {
				line = doc.LineOf(splitField(field)...)
			}
			res.Problems = append(res.Problems, &Problem{File: doc.File, Line: line, Object: name, Field: field, Msg: msg})
		}
		if obj.GetName() == "" {
			problem("metadata.name", "a mutator needs a name")
			continue
		}
		if prev, ok := seen[name]; ok {
			problem("metadata.name", fmt.Sprintf("%s is defined twice (also at %s:%d); Gatekeeper would keep only one", name, prev.File, prev.Line))
			continue
		}
		seen[name] = doc
		d, err := pre[i].d, pre[i].err
		if err != nil {
			n := len(res.Problems)
			reportErr(problem, err)
			ps := res.Problems[n:]
			sort.SliceStable(ps, func(i, j int) bool { return ps[i].Line < ps[j].Line })
			continue
		}
		if ws, ok := d.Mutator.(schema.MutatorWithSchema); ok {
			// Gatekeeper holds every mutator it accepted, including ones that never apply, and
			// they take part in schema conflicts. The error only says that a conflict exists; the
			// DB records it, as in Gatekeeper.
			_ = db.Upsert(ws)
		}
		m, reason, err := Lower(src, d)
		if err != nil {
			reportErr(problem, err)
			continue
		}
		if reason != "" {
			res.Notes = append(res.Notes, diag.Note{Kind: diag.NeverApplies, File: doc.File, Line: doc.Line, Object: name, Msg: "no policy emitted: " + reason})
			continue
		}
		all = append(all, decoded{doc, d, m})
	}
	// Gatekeeper skips every mutator whose location disagrees with another's about the shape of
	// the object (a field used as an object by one and a list by another). Refuse them all.
	//
	// A mutator whose path only runs through a node others disagree about is skipped or not
	// depending on the order Gatekeeper loaded them: its DB marks a mutator when it is upserted
	// into a conflict, and does not revisit one upserted before (Upsert vs GetConflicts in
	// pkg/mutation/schema). Refuse it too rather than guess the order.
	for _, a := range all {
		id := a.d.Mutator.ID()
		others := db.GetConflicts(id)
		if !db.HasConflicts(id) && len(others) == 0 {
			res.Mutations = append(res.Mutations, a.m)
			continue
		}
		var names []string
		for cid := range others {
			if cid != id {
				names = append(names, cid.Kind+"/"+cid.Name)
			}
		}
		sort.Strings(names)
		msg := fmt.Sprintf("conflicts with %s about the type of a path element (object or list); Gatekeeper skips all conflicting mutators, so no policy can reproduce it: make the locations agree", strings.Join(names, ", "))
		if !others[id] {
			msg = fmt.Sprintf("its location runs through a path element that %s disagree about (object or list); Gatekeeper skips this mutator or not depending on the order it loaded them, so no policy can reproduce it: make the locations agree", strings.Join(names, " and "))
		}
		res.Problems = append(res.Problems, &Problem{File: a.doc.File, Line: a.doc.LineOf("spec", "location"), Object: a.m.Source.String(), Field: "spec.location", Msg: msg})
	}
	sort.SliceStable(res.Mutations, func(i, j int) bool { return res.Mutations[i].SortKey < res.Mutations[j].SortKey })
	return res
}

func reportErr(problem func(field, msg string), err error) {
	switch e := err.(type) {
	case *FieldError:
		problem(e.Field, e.Msg)
	case FieldErrors:
		for _, fe := range e {
			problem(fe.Field, fe.Msg)
		}
	default:
		problem("", err.Error())
	}
}

// splitField splits a field path ("spec.applyTo[0].kinds") into the keys doc.LineOf follows. It
// stops at the first list index, so the line is that of the list.
func splitField(f string) []string {
	if i := strings.IndexByte(f, '['); i >= 0 {
		f = f[:i]
	}
	return strings.Split(f, ".")
}
