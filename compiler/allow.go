package compiler

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/mapc-dev/mapc/compiler/diag"
)

// AllowList names the mutators that stay on Gatekeeper: their refusals are expected.
//
//	apiVersion: mapc.dev/v1alpha1
//	kind: RefusalAllowList
//	refusals:
//	- mutator: Assign/add-external-label    # Kind/name
//	  reason: calls an external data provider; stays on Gatekeeper's webhook
type AllowList struct {
	File     string
	Refusals []AllowedRefusal
}

// AllowedRefusal is one entry of an allow-list.
type AllowedRefusal struct {
	Mutator string `json:"mutator"`
	Reason  string `json:"reason"`
}

type allowListFile struct {
	APIVersion string           `json:"apiVersion"`
	Kind       string           `json:"kind"`
	Refusals   []AllowedRefusal `json:"refusals"`
}

// ReadAllowList reads an allow-list file strictly: unknown fields, a missing reason, an entry
// that is not Kind/name of a mutator kind, or a mutator named twice are errors.
func ReadAllowList(path string) (*AllowList, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var f allowListFile
	if err := yaml.UnmarshalStrict(bytes.TrimSpace(data), &f); err != nil {
		return nil, fmt.Errorf("%s: not a RefusalAllowList: %v", path, err)
	}
	if f.APIVersion != "mapc.dev/v1alpha1" || f.Kind != "RefusalAllowList" {
		return nil, fmt.Errorf("%s: want apiVersion: mapc.dev/v1alpha1 and kind: RefusalAllowList, got %q %q", path, f.APIVersion, f.Kind)
	}
	var errs []error
	seen := map[string]bool{}
	for i, r := range f.Refusals {
		kind, name, ok := strings.Cut(r.Mutator, "/")
		switch {
		case !ok || name == "" || !slices.Contains(kinds(), kind):
			errs = append(errs, fmt.Errorf("%s: refusals[%d].mutator %q: write Kind/name, the kind one of %s", path, i, r.Mutator, strings.Join(kinds(), ", ")))
		case strings.TrimSpace(r.Reason) == "":
			errs = append(errs, fmt.Errorf("%s: refusals[%d] (%s): give a reason, so that whoever reads the list knows why the mutator stays on Gatekeeper", path, i, r.Mutator))
		case seen[r.Mutator]:
			errs = append(errs, fmt.Errorf("%s: refusals[%d]: %s is listed twice", path, i, r.Mutator))
		}
		seen[r.Mutator] = true
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &AllowList{File: path, Refusals: f.Refusals}, nil
}

// kinds are the kinds of every route's input policies.
func kinds() []string {
	var out []string
	for _, r := range routes {
		out = append(out, r.Kinds()...)
	}
	return out
}

// Allow applies allow-lists to a compilation: the problems of listed mutators move to Kept
// (their status becomes Kept, the reason joined to the refusal's), and every entry that names no
// refused mutator is a problem of its own, since a stale list would hide the next real refusal:
// a listed mutator that now compiles, or that is not among the inputs any more.
func (o *Output) Allow(lists ...*AllowList) {
	allowed := map[string]string{}
	from := map[string]string{}
	for _, l := range lists {
		for _, r := range l.Refusals {
			allowed[r.Mutator], from[r.Mutator] = r.Reason, l.File
		}
	}
	if len(allowed) == 0 {
		return
	}
	used := map[string]bool{}
	var problems []error
	for _, e := range o.Problems {
		var p *diag.Problem
		if errors.As(e, &p) {
			if _, ok := allowed[p.Object]; ok {
				used[p.Object] = true
				p.Severity = diag.Warning
				o.Kept = append(o.Kept, e)
				continue
			}
		}
		problems = append(problems, e)
	}
	status := map[string]Status{}
	for i := range o.Mutators {
		m := &o.Mutators[i]
		status[m.Mutator] = m.Status
		if m.Status == Refused && used[m.Mutator] {
			m.Status = Kept
			m.Reasons = append(m.Reasons, "kept on Gatekeeper by "+from[m.Mutator]+": "+allowed[m.Mutator])
		}
	}
	var names []string
	for n := range allowed {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if used[n] {
			continue
		}
		why := "it is not among the inputs"
		if s, ok := status[n]; ok {
			why = "it is " + string(s) + ", not refused"
		}
		problems = append(problems, fmt.Errorf("%s: %s is listed as a refusal to allow, but %s: remove it from the list", from[n], n, why))
	}
	o.Problems = problems
}
