package kyverno

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mapc-dev/mapc/compiler/diag"
	"github.com/mapc-dev/mapc/compiler/source"
)

// Config is what Kyverno's ConfigMap (pkg/config, as v1.19.1 loads it) says of the requests its
// mutating webhooks handle, which the compiled policies honour as Kyverno's webhook does:
//
//   - resourceFilters: requests Kyverno's handler answers without running any policy;
//   - excludeUsernames and excludeGroups: users and groups whose requests it answers so (a
//     leading "!" includes them again, ahead of any exclusion);
//   - webhooks: the namespaceSelector and objectSelector of its webhooks, with which the API
//     server does not even call them;
//   - matchConditions: the match conditions of its webhooks.
//
// Refused: excludeRoles and excludeClusterRoles (Kyverno looks up the user's roles, which a
// MutatingAdmissionPolicy cannot), and values Kyverno fails to parse (it logs the error and goes
// on without them) or the API server refuses in a webhook. Other keys do not change what a
// mutate rule does to a request, or are refused with the features that read them (the default
// registry: images).
type Config struct {
	Filters []ResourceFilter
	// Excluded and Included: excludeUsernames and excludeGroups, without and with a leading "!".
	Excluded, Included Users
	NamespaceSelector  *metav1.LabelSelector
	ObjectSelector     *metav1.LabelSelector
	// MatchConditions are the match conditions of Kyverno's webhooks (a policy with conditions of
	// its own has its own webhook, with those instead); their expressions are checked by the
	// compiler. Doc is the ConfigMap, for messages.
	MatchConditions []MatchCondition
	Doc             *source.Document
	// Registry are defaultRegistry and enableDefaultRegistryMutation ("key: value") where set
	// to other than Kyverno's defaults (docker.io, true): the images variables read them, and
	// are translated for the defaults only.
	Registry []string
}

// ResourceFilter is one [kind,namespace,name] of resourceFilters, its kind parsed as Kyverno
// parses it (ParseKindSelector); every field is a wildcard pattern.
type ResourceFilter struct {
	Group, Version, Kind, Subresource, Namespace, Name string
	// Text is the filter as written.
	Text string
}

// Users are user name and group patterns (wildcards).
type Users struct{ Names, Groups []string }

// Empty: no pattern.
func (u Users) Empty() bool { return len(u.Names) == 0 && len(u.Groups) == 0 }

// IsZero: the configuration changes nothing.
func (c *Config) IsZero() bool {
	return c == nil || len(c.Filters) == 0 && c.Excluded.Empty() && c.NamespaceSelector == nil && c.ObjectSelector == nil && len(c.MatchConditions) == 0
}

// ReadConfig reads Kyverno's ConfigMap, refusing what the policies cannot honour.
func ReadConfig(d *source.Document) (*Config, []error) {
	obj := d.Object
	var problems []error
	refuse := func(key, format string, args ...any) {
		path := []string{"data"}
		field := "data"
		if key != "" {
			path, field = append(path, key), "data."+key
		}
		problems = append(problems, &diag.Problem{File: d.File, Line: d.LineOf(path...), Object: obj.GetKind() + "/" + obj.GetName(), Field: field, Msg: fmt.Sprintf(format, args...)})
	}
	if obj.GetAPIVersion() != "v1" || obj.GetKind() != "ConfigMap" {
		problems = append(problems, &diag.Problem{File: d.File, Line: d.Line, Object: obj.GetKind() + "/" + obj.GetName(),
			Msg: fmt.Sprintf("Kyverno's configuration is a v1 ConfigMap (the kyverno ConfigMap of Kyverno's namespace), not %s %s", obj.GetAPIVersion(), obj.GetKind())})
		return nil, problems
	}
	raw, _ := obj.Object["data"].(map[string]any)
	if obj.Object["data"] != nil && raw == nil {
		refuse("", "must be a map of strings")
		return nil, problems
	}
	data := map[string]string{}
	for k, v := range raw {
		s, ok := v.(string)
		if !ok {
			refuse(k, "must be a string (a ConfigMap's data holds strings)")
			continue
		}
		data[k] = s
	}
	c := &Config{Doc: d}
	c.Filters = parseFilters(data["resourceFilters"])
	for _, k := range []string{"defaultRegistry", "enableDefaultRegistryMutation"} {
		if v, ok := data[k]; ok && v != map[string]string{"defaultRegistry": "docker.io", "enableDefaultRegistryMutation": "true"}[k] {
			c.Registry = append(c.Registry, k+": "+v)
		}
	}
	c.Excluded.Names, c.Included.Names = parseExclusions(data["excludeUsernames"])
	c.Excluded.Groups, c.Included.Groups = parseExclusions(data["excludeGroups"])
	for _, key := range []string{"excludeRoles", "excludeClusterRoles"} {
		if ex, in := parseExclusions(data[key]); len(ex)+len(in) > 0 {
			refuse(key, "Kyverno skips the requests of users bound to these roles, which it looks up in the cluster's RBAC; a MutatingAdmissionPolicy cannot see a user's roles: list the users or groups in excludeUsernames or excludeGroups instead")
		}
	}
	if s, ok := data["webhooks"]; ok {
		var w struct {
			NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`
			ObjectSelector    *metav1.LabelSelector `json:"objectSelector,omitempty"`
		}
		if err := json.Unmarshal([]byte(s), &w); err != nil {
			refuse("webhooks", "%s, where Kyverno v1.19 reads a JSON object with namespaceSelector and objectSelector; Kyverno would log the error and install its webhooks without selectors", jsonError(err))
		} else {
			for what, sel := range map[string]*metav1.LabelSelector{"namespaceSelector": w.NamespaceSelector, "objectSelector": w.ObjectSelector} {
				if _, err := metav1.LabelSelectorAsSelector(sel); err != nil {
					refuse("webhooks", "%s: %v", what, err)
				}
			}
			c.NamespaceSelector, c.ObjectSelector = w.NamespaceSelector, w.ObjectSelector
		}
	}
	if s, ok := data["matchConditions"]; ok {
		var conds []struct{ Name, Expression string }
		if err := json.Unmarshal([]byte(s), &conds); err != nil {
			refuse("matchConditions", "%s, where Kyverno v1.19 reads a JSON list of match conditions; Kyverno would log the error and install its webhooks without them", jsonError(err))
		} else if len(conds) > maxMatchConditions {
			refuse("matchConditions", "%d conditions: the API server accepts at most %d on one webhook", len(conds), maxMatchConditions)
		} else {
			seen := map[string]bool{}
			for i, mc := range conds {
				if sub, msg := checkCondition(mc.Name, mc.Expression, seen); msg != "" {
					refuse("matchConditions", "[%d].%s: %s (the API server refuses Kyverno's webhooks)", i, sub, msg)
					continue
				}
				c.MatchConditions = append(c.MatchConditions, MatchCondition{Name: mc.Name, Expression: mc.Expression, At: i})
			}
		}
	}
	slices.SortStableFunc(problems, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
	return c, problems
}

// jsonError says what is wrong with a value that does not decode.
func jsonError(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Field != "" {
			return fmt.Sprintf("%s is a JSON %s", te.Field, te.Value)
		}
		return fmt.Sprintf("a JSON %s", te.Value)
	}
	return "not JSON: " + err.Error()
}

var filterRe = regexp.MustCompile(`\[([^\[\]]*)\]`)

// parseFilters reads resourceFilters as Kyverno does (config.parseKinds): each [...] split at
// commas into kind, namespace and name (missing ones empty); an element without a kind matches
// nothing (Kyverno's zero filter has empty patterns, which match only empty strings: no request
// has an empty kind).
func parseFilters(in string) []ResourceFilter {
	var out []ResourceFilter
	var f ResourceFilter
	for _, element := range filterRe.FindAllString(in, -1) {
		text := element
		element = strings.Trim(element, "[")
		element = strings.Trim(element, "]")
		parts := strings.Split(element, ",")
		switch len(parts) {
		case 3:
			f = newFilter(parts[0], parts[1], parts[2])
		case 2:
			f = newFilter(parts[0], parts[1], "")
		case 1:
			f = newFilter(parts[0], "", "")
		}
		// An element of more than three parts: Kyverno appends the filter before it again.
		f.Text = text
		out = append(out, f)
	}
	return out
}

func newFilter(kind, namespace, name string) ResourceFilter {
	if kind == "" {
		return ResourceFilter{}
	}
	g, v, k, s := ParseKindSelector(kind)
	return ResourceFilter{Group: g, Version: v, Kind: k, Subresource: s, Namespace: namespace, Name: name}
}

// ParseKindSelector is Kyverno's kubeutils.ParseKindSelector (for rules' kinds and resource
// filters alike): Kind, Kind/subresource,
// Version/Kind, */subresource, */*, Group/Version/Kind, Version/Kind/subresource,
// Group/Version/Kind/subresource; the last part's dots also split ("Kind.subresource").
func ParseKindSelector(input string) (string, string, string, string) {
	parts := strings.Split(input, "/")
	if len(parts) > 0 {
		parts = append(parts[:len(parts)-1], strings.Split(parts[len(parts)-1], ".")...)
	}
	switch len(parts) {
	case 1:
		return "*", "*", parts[0], ""
	case 2:
		if parts[0] == "*" && parts[1] == "*" {
			return "*", "*", "*", "*"
		}
		if parts[0] == "*" && strings.ToLower(parts[1]) == parts[1] {
			return "*", "*", parts[0], parts[1]
		}
		if versionRegex.MatchString(parts[0]) {
			return "*", parts[0], parts[1], ""
		}
		return "*", "*", parts[0], parts[1]
	case 3:
		if versionRegex.MatchString(parts[0]) {
			return "*", parts[0], parts[1], parts[2]
		}
		return parts[0], parts[1], parts[2], ""
	case 4:
		return parts[0], parts[1], parts[2], parts[3]
	}
	return "", "", "", ""
}

// parseExclusions is Kyverno's config.parseExclusions: comma-separated patterns, trimmed, empty
// ones dropped; a leading "!" makes an inclusion.
func parseExclusions(in string) (exclusions, inclusions []string) {
	for _, in := range strings.Split(in, ",") {
		in := strings.TrimSpace(in)
		if in == "" {
			continue
		}
		if strings.HasPrefix(in, "!") {
			if in = strings.TrimSpace(in[1:]); in != "" {
				inclusions = append(inclusions, in)
			}
			continue
		}
		exclusions = append(exclusions, in)
	}
	return exclusions, inclusions
}

// Match is Kyverno's wildcard match (ext/wildcard, go-wildcard v1.0.3): "*" any run of
// characters, "?" exactly one; the empty pattern matches only the empty string.
func Match(pattern, s string) bool {
	if pattern == "" || pattern == "*" {
		return pattern == "*" || s == ""
	}
	return deepMatch([]rune(s), []rune(pattern))
}

func deepMatch(str, pattern []rune) bool {
	for len(pattern) > 0 {
		switch pattern[0] {
		default:
			if len(str) == 0 || str[0] != pattern[0] {
				return false
			}
		case '?':
			if len(str) == 0 {
				return false
			}
		case '*':
			return deepMatch(str, pattern[1:]) || len(str) > 0 && deepMatch(str[1:], pattern)
		}
		str, pattern = str[1:], pattern[1:]
	}
	return len(str) == 0
}
