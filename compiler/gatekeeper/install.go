package gatekeeper

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"

	configv1alpha1 "github.com/open-policy-agent/gatekeeper/v3/apis/config/v1alpha1"

	"github.com/mapc-dev/mapc/compiler/diag"
	"github.com/mapc-dev/mapc/compiler/source"
)

// ConfigGroup and ConfigKind name Gatekeeper's Config resource.
const (
	ConfigGroup = "config.gatekeeper.sh"
	ConfigKind  = "Config"
)

// IsConfig reports whether d is a Gatekeeper Config.
func IsConfig(d *source.Document) bool {
	gvk := d.Object.GroupVersionKind()
	return gvk.Group == ConfigGroup && gvk.Kind == ConfigKind
}

// namespaceWildcard is the pattern Gatekeeper's CRDs accept for namespaces: a name, optionally
// with a leading or a trailing "*".
var namespaceWildcard = regexp.MustCompile(`^(\*|\*-)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\*|-\*)?$`)

// CheckNamespaceWildcards rejects namespace patterns Gatekeeper would not accept.
func CheckNamespaceWildcards(ws []string) error {
	for _, w := range ws {
		if !namespaceWildcard.MatchString(w) {
			return fmt.Errorf("namespace %q: use a namespace name, optionally with a leading or trailing * (as Gatekeeper's excludedNamespaces)", w)
		}
	}
	return nil
}

// IgnoreLabel marks namespaces Gatekeeper's installed webhook never sees (its namespaceSelector
// requires the label to be absent).
const IgnoreLabel = "admission.gatekeeper.sh/ignore"

// InstallContext takes Gatekeeper's Config documents out of docs and returns the namespaces they
// exclude from the mutation webhook (spec.match[] entries whose processes include
// "mutation-webhook" or "*"), with a note per Config and a problem per Config it cannot read.
func InstallContext(docs []*source.Document) ([]*source.Document, []string, []diag.Note, []error) {
	var rest []*source.Document
	var excluded []string
	var notes []diag.Note
	var problems []error
	for _, d := range docs {
		if !IsConfig(d) {
			rest = append(rest, d)
			continue
		}
		cfg := &configv1alpha1.Config{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(d.Object.Object, cfg); err != nil {
			problems = append(problems, &Problem{File: d.File, Line: d.Line, Object: "Config/" + d.Object.GetName(), Field: "spec", Msg: err.Error()})
			continue
		}
		var mine []string
		for i, m := range cfg.Spec.Match {
			applies := false
			for _, p := range m.Processes {
				applies = applies || p == "*" || p == "mutation-webhook"
			}
			if !applies {
				continue
			}
			for _, w := range m.ExcludedNamespaces {
				s := string(w)
				if err := CheckNamespaceWildcards([]string{s}); err != nil {
					problems = append(problems, &Problem{File: d.File, Line: d.LineOf("spec", "match", fmt.Sprint(i), "excludedNamespaces"), Object: "Config/" + d.Object.GetName(),
						Field: fmt.Sprintf("spec.match[%d].excludedNamespaces", i), Msg: err.Error()})
					continue
				}
				mine = append(mine, s)
			}
		}
		sort.Strings(mine)
		mine = slices.Compact(mine)
		if len(mine) == 0 {
			notes = append(notes, diag.Note{Kind: diag.Installation, File: d.File, Line: d.Line, Msg: fmt.Sprintf("Config/%s excludes no namespace from mutation", d.Object.GetName())})
		} else {
			notes = append(notes, diag.Note{Kind: diag.Installation, File: d.File, Line: d.Line, Object: "Config/" + d.Object.GetName(),
				Msg: "every policy skips the namespaces it excludes from mutation: " + strings.Join(mine, ", ")})
		}
		excluded = append(excluded, mine...)
	}
	sort.Strings(excluded)
	return rest, slices.Compact(excluded), notes, problems
}

// ConfigExclusions returns the namespaces the Gatekeeper Configs among docs exclude from the
// mutation webhook, and the problems reading them.
func ConfigExclusions(docs []*source.Document) ([]string, []error) {
	_, excluded, _, problems := InstallContext(docs)
	return excluded, problems
}
