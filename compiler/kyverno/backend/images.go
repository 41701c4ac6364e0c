package backend

import (
	"fmt"
	"slices"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"

	"github.com/mapc-dev/mapc/compiler/kyverno"
	"github.com/mapc-dev/mapc/compiler/route"
)

// Kyverno builds its images variable once per admission request, from the object as the request
// brings it; the compiled policies parse the images of the object each mutation sees (see
// lower.Images). The two agree where nothing that can run before a mutation reading images can
// change a container list: no earlier rule or foreach entry of its policy (every rule of it,
// when the policies are reinvoked), and no rule of another compiled policy, which the API server
// can run first. A rule that can change a list is one whose patches (its foreach entries'
// included) write in a container list or above one (containers, initContainers,
// ephemeralContainers of a Pod or a Pod template), or at a path with a variable in it.

// imagesUse is what a compiled policy reads of images and changes of the container lists.
type imagesUse struct {
	// Reads are the rules that read images; Changes those that can change a container list.
	Reads, Changes []kindedRule
}

type kindedRule struct {
	rule  *kyverno.Rule
	kinds []gk
}

// imagesBefore refuses the policy's rules reading images after something of the policy that can
// change a container list, and records its readers and changers in use.
func imagesBefore(p *kyverno.Policy, cfg *kyverno.Config, rules []emitted, opts route.Options, use *imagesUse) error {
	for i, m := range rules {
		if changesContainers(m) {
			use.Changes = append(use.Changes, kindedRule{m.rule, m.kinds})
		}
		if !readsImages(m.e) && (m.apply == nil || !readsImages(m.apply)) {
			continue
		}
		if cfg != nil && len(cfg.Registry) > 0 {
			return problem(p, m.rule, "", fmt.Errorf("reads images, and Kyverno's configuration sets %s: the images variables are translated for Kyverno's default registry settings only (defaultRegistry docker.io, enableDefaultRegistryMutation true)", strings.Join(cfg.Registry, ", ")))
		}
		use.Reads = append(use.Reads, kindedRule{m.rule, m.kinds})
		for j, w := range rules {
			if j == i || (j > i && opts.Reinvocation != admissionregistrationv1.IfNeededReinvocationPolicy) {
				continue // its own patch applies after it reads
			}
			if overlap(m.kinds, w.kinds) && changesContainers(w) {
				what := fmt.Sprintf("the rule %s", w.rule.Name)
				switch {
				case w.rule == m.rule:
					what = fmt.Sprintf("its foreach[%d]", w.entry)
				case j > i:
					what += " (the policies are reinvoked: it can run before)"
				}
				return problem(p, m.rule, "", fmt.Errorf("reads images after %s can change a container list: Kyverno's images are those of the object the request brings, a MutatingAdmissionPolicy sees the object as earlier mutations left it; not supported", what))
			}
		}
	}
	return nil
}

// imagesAcross is, for each policy (by index) that reads images beside another compiled policy
// that can change a container list of the same kinds, why it is refused: the API server can run
// that policy first. uses are the compiled policies' (nil: not compiled).
func imagesAcross(ps []*kyverno.Policy, uses []*imagesUse) map[int]error {
	out := map[int]error{}
	for i, u := range uses {
		if u == nil {
			continue
		}
		for _, r := range u.Reads {
			for j, w := range uses {
				if j == i || w == nil || out[i] != nil {
					continue
				}
				for _, c := range w.Changes {
					if overlap(r.kinds, c.kinds) {
						out[i] = problem(ps[i], r.rule, "", fmt.Errorf("reads images, and the rule %s of %s can change a container list of the same kinds: Kyverno's images are those of the object the request brings, while the API server can run that policy first; not supported", c.rule.Name, ps[j].Object()))
						break
					}
				}
			}
		}
	}
	return out
}

// changesContainers: can the emitted rule (or foreach entry) change a container list?
func changesContainers(m emitted) bool {
	r := m.rule
	if m.entry >= 0 {
		return entryChangesContainers(r.ForEach[m.entry])
	}
	return smpChangesContainers(r.StrategicMerge, nil) || opsChangeContainers(r.JSON6902)
}

func entryChangesContainers(fe kyverno.ForEach) bool {
	if smpChangesContainers(fe.StrategicMerge, nil) || opsChangeContainers(fe.JSON6902) {
		return true
	}
	for _, sub := range fe.ForEach {
		if entryChangesContainers(sub) {
			return true
		}
	}
	return false
}

// isContainerPath: is path (field names) in or above a container list, or unknown (a variable)?
func isContainerPath(path []string) bool {
	for _, c := range containerPaths {
		n := min(len(path), len(c))
		if slices.Equal(path[:n], c[:n]) {
			return true
		}
	}
	return slices.ContainsFunc(path, func(f string) bool { return strings.Contains(f, "ontainers") || strings.Contains(f, "{{") })
}

// containerPaths are where Kyverno's images read container lists.
var containerPaths = func() [][]string {
	var out [][]string
	for _, at := range [][]string{{"spec"}, {"spec", "template", "spec"}, {"spec", "jobTemplate", "spec", "template", "spec"}} {
		for _, l := range []string{"initContainers", "containers", "ephemeralContainers"} {
			out = append(out, append(slices.Clone(at), l))
		}
	}
	return out
}()

// smpChangesContainers: does a strategic merge patch write in or above a container list? Keys
// are read without their anchors; a directive ($patch, $setElementOrder/...) above a list counts
// as a write.
func smpChangesContainers(patch map[string]any, at []string) bool {
	for k, v := range patch {
		key := strings.TrimSuffix(strings.TrimLeft(k, "+<(=X^"), ")")
		if strings.HasPrefix(key, "$") {
			if isContainerPath(at) {
				return true
			}
			continue
		}
		path := append(slices.Clone(at), key)
		if !isContainerPath(path) {
			continue
		}
		sub, ok := v.(map[string]any)
		if !ok || smpChangesContainers(sub, path) {
			return true
		}
	}
	return false
}

// opsChangeContainers: does a JSON patch write in or above a container list?
func opsChangeContainers(ops []kyverno.Op) bool {
	for _, op := range ops {
		var path []string
		if op.Path != "" {
			for _, t := range strings.Split(strings.TrimPrefix(op.Path, "/"), "/") {
				path = append(path, strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~"))
			}
		}
		if isContainerPath(path) {
			return true
		}
	}
	return false
}
