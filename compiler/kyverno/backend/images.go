package backend

import (
	"fmt"
	"slices"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"

	"github.com/mapc-dev/mapc/compiler/kyverno"
	"github.com/mapc-dev/mapc/compiler/kyverno/lower"
	"github.com/mapc-dev/mapc/compiler/route"
)

// Kyverno builds its images variable once per admission request, from the object as the request
// brings it; the compiled policies parse the images of the object each mutation sees (see
// lower.Images). The two agree where nothing that can run before a mutation reading images can
// change the images: no earlier rule or foreach entry of its policy (every rule of it,
// when the policies are reinvoked), and no rule of another compiled policy, which the API server
// can run first. A rule that can change the images is one whose patches (its foreach entries'
// included) write a container's image or name, a whole container, a container list
// (containers, initContainers, ephemeralContainers of a Pod or a Pod template) or what holds
// one, or at a path a variable names. Other fields of the containers (imagePullPolicy under a
// condition on the image, resources, env) change nothing of them.

// policyUse is what the checks across compiled policies need of one: what it reads and changes
// of the images, and its rules (for defaultingAcross).
type policyUse struct {
	// Reads are the rules that read images; Changes those that can change the images.
	Reads, Changes []kindedRule
	Rules          []emitted
}

type kindedRule struct {
	rule  *kyverno.Rule
	kinds []gk
}

// imagesBefore refuses the policy's rules reading images after something of the policy that can
// change the images, and records its readers and changers in use.
func imagesBefore(p *kyverno.Policy, rules []emitted, opts route.Options, use *policyUse) error {
	for i, m := range rules {
		if changesImages(m) {
			use.Changes = append(use.Changes, kindedRule{m.rule, m.kinds})
		}
		if !readsImages(m.e) {
			continue
		}
		use.Reads = append(use.Reads, kindedRule{m.rule, m.kinds})
		for j, w := range rules {
			if j == i || (j > i && opts.Reinvocation != admissionregistrationv1.IfNeededReinvocationPolicy) {
				continue // its own patch applies after it reads
			}
			if overlap(m.kinds, w.kinds) && changesImages(w) {
				what := fmt.Sprintf("the rule %s", w.rule.Name)
				switch {
				case w.rule == m.rule:
					what = fmt.Sprintf("its foreach[%d]", w.entry)
				case j > i:
					what += " (the policies are reinvoked: it can run before)"
				}
				return problem(p, m.rule, "", fmt.Errorf("reads images after %s can change the containers' images: Kyverno's images are those of the object the request brings, a MutatingAdmissionPolicy sees the object as earlier mutations left it; not supported: read the images in a rule before it", what))
			}
		}
	}
	return nil
}

// imagesAcross is, for each policy (by index) that reads images beside another compiled policy
// that can change the containers' images of the same kinds, why it is refused: the API server can run
// that policy first. uses are the compiled policies' (nil: not compiled).
func imagesAcross(ps []*kyverno.Policy, uses []*policyUse) map[int]error {
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
						out[i] = problem(ps[i], r.rule, "", fmt.Errorf("reads images, and the rule %s of %s can change the containers' images of the same kinds: Kyverno's images are those of the object the request brings, while the API server can run that policy first; not supported: put both rules in one policy, the one reading images first", c.rule.Name, ps[j].Object()))
						break
					}
				}
			}
		}
	}
	return out
}

// changesImages: can the emitted rule (or foreach entry) change the images (see writesImage)?
func changesImages(m emitted) bool {
	r := m.rule
	if m.entry >= 0 {
		return entryChangesImages(r.ForEach[m.entry])
	}
	return smpChangesContainers(r.StrategicMerge, nil) || opsChangeContainers(r.JSON6902)
}

// entryChangesImages: can a foreach entry, or one nested in it, change the images?
func entryChangesImages(fe kyverno.ForEach) bool {
	if smpChangesContainers(fe.StrategicMerge, nil) || opsChangeContainers(fe.JSON6902) {
		return true
	}
	for _, sub := range fe.ForEach {
		if entryChangesImages(sub) {
			return true
		}
	}
	return false
}

// listAt says where path (field names) stands to the container lists: above one or on one
// (above), inside one (in, with the rest of path below the list), or elsewhere.
func listAt(path []string) (above, in bool, rest []string) {
	for _, c := range containerPaths {
		n := min(len(path), len(c))
		if !slices.Equal(path[:n], c[:n]) {
			continue
		}
		if len(path) <= len(c) {
			return true, false, nil
		}
		return false, true, path[len(c):]
	}
	return false, false, nil
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

// writesImage: can a strategic merge item of a container list (its fields) change the images?
// Only its image, or a directive, can: the name is the merge key, and a container without an
// image added by the merge has no entry in Kyverno's images. Condition anchors read.
func writesImage(item any) bool {
	m, ok := item.(map[string]any)
	if !ok {
		return true
	}
	for k := range m {
		_, key := lower.Anchor(k)
		switch {
		case k == "name", k == "(image)", k == "<(image)":
		case strings.HasPrefix(k, "$"), strings.Contains(k, "{{"), key == "name", key == "image":
			return true
		}
	}
	return false
}

// smpChangesContainers: can a strategic merge patch change the images (see writesImage), or
// replace a container list or what holds one? Directives above a list count as such.
func smpChangesContainers(patch map[string]any, at []string) bool {
	for k, v := range patch {
		if strings.HasPrefix(k, "$") {
			if above, _, _ := listAt(at); above || len(at) == 0 {
				return true
			}
			continue
		}
		if strings.Contains(k, "{{") {
			return true
		}
		_, key := lower.Anchor(k)
		path := append(slices.Clone(at), key)
		above, _, _ := listAt(path)
		if !above {
			continue
		}
		if isList(path) {
			items, ok := v.([]any)
			if !ok || slices.ContainsFunc(items, writesImage) {
				return true
			}
			continue
		}
		sub, ok := v.(map[string]any)
		if !ok || smpChangesContainers(sub, path) {
			return true
		}
	}
	return false
}

// isList: is path a container list?
func isList(path []string) bool {
	return slices.ContainsFunc(containerPaths, func(c []string) bool { return slices.Equal(c, path) })
}

// opsChangeContainers: can a JSON patch change the images: write a list or above it, a whole
// container, or a container's image or name (or a field a variable names)?
func opsChangeContainers(ops []kyverno.Op) bool {
	for _, op := range ops {
		path := lower.PathTokens(op.Path)
		above, in, rest := listAt(path)
		if !above && !in && slices.ContainsFunc(path, func(t string) bool { return strings.Contains(t, "{{") }) {
			return true // a variable may name the way to a list
		}
		if above || in && (len(rest) < 2 || rest[1] == "image" || rest[1] == "name" || strings.Contains(rest[1], "{{")) {
			return true
		}
	}
	return false
}
