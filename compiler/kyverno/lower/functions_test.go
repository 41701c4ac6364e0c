package lower

import (
	"regexp"
	"strings"
	"testing"

	"github.com/mapc-dev/mapc/cel"
)

// TestAnchoredNonEmpty: regex_replace_all is lowered only for patterns anchored at the start
// of the text that cannot match the empty text (then they match at most once, and CEL's find
// tells a match from none).
func TestAnchoredNonEmpty(t *testing.T) {
	for pat, want := range map[string]bool{
		`^abc`: true, `^[^/]+`: true, `^.{2}-`: true, `^x?y`: true, `^(w|a)`: true, `^web-([0-9]+)`: true,
		`abc`: false, `-`: false, `^a*`: false, `^(a|)`: false, `^$`: false, `^\b`: false,
		`(?m)^a`: false, `^a|b`: false, `(^a)`: false, `x^a`: false, `^(`: false,
	} {
		if got := anchoredNonEmpty(pat); got != want {
			t.Errorf("anchoredNonEmpty(%q) = %v, want %v", pat, got, want)
		}
	}
}

// TestGroupReplacement: a replacement with $ is expanded as Go expands it, for patterns of one
// group after literal text or a run that only one start of a text matches, and before literal
// text. The lowered formula (find's match, the group's text cut from it) is computed here with
// Go's regexp as CEL computes it, and compared with Go's ReplaceAllString on many texts.
func TestGroupReplacement(t *testing.T) {
	texts := []string{"", "old.example/app:1", "old.example/", "old.example/a/b@sha256:x", "r.io/app", "r.io/", "/app", "app",
		"web-12-shop", "web-1-", "web--", "w", "wx", "ab", "éßßx-rest", "éx", "note: a\nb", "a:latest", "x/y:latest", "MiXed/App", "a\n/b"}
	for _, c := range []struct{ pat, repl string }{
		{`^old\.example/(.*)$`, `new.example/$1`},
		{`^old/(.*)`, `${1}-x$$`},
		{`^(w)`, `$1x`}, // $1x names group "1x", which does not exist
		{`^web-(?P<n>[0-9]+)-`, `site-${n}:$0`},
		{`^(a)b$`, `$2[$1]`},
		{`^é(ß+)`, `$1`},
		{`^[^/]+/(.*)$`, `mirror.example/$1`},
		{`^[^/]*/(.+)`, `m/$1`},
		{`^x[^/]+/(.*)`, `<$1>`},
		{`^(.*):latest$`, `$1:stable`},
		{`^[a-zA-Z]+/(.*)`, `$1`},
	} {
		parts, before, prefix, after, ok := groupReplacement(c.pat, c.repl)
		if !ok {
			t.Errorf("groupReplacement(%q, %q) is refused", c.pat, c.repl)
			continue
		}
		re := regexp.MustCompile(c.pat)
		for _, x := range texts {
			want := re.ReplaceAllString(x, c.repl)
			got := x
			if m := re.FindString(x); m != "" {
				r := []rune(m)
				start := before
				if prefix != "" {
					start = len([]rune(regexp.MustCompile(prefix).FindString(m)))
				}
				var b strings.Builder
				for _, p := range parts {
					switch p.group {
					case -1:
						b.WriteString(p.text)
					case 0:
						b.WriteString(m)
					case 1:
						b.WriteString(string(r[start : len(r)-after]))
					}
				}
				got = b.String() + x[len(m):]
			}
			if got != want {
				t.Errorf("%q on %q with %q: lowered %q, Go %q", c.pat, x, c.repl, got, want)
			}
		}
	}
	for _, pat := range []string{`^(a)(b)`, `^a(b)c(d)`, `^a(b)[cd]`, `(x)`, `(?m)^a(b)`, `^a*(b)`, `^[^/]+(b)`, `^[^/]+a(b)`, `^[a-z/]+/(x)`, `^.+/(x)`, `^(?i)[^a]+A(b)`} {
		if _, _, _, _, ok := groupReplacement(pat, "$1"); ok {
			t.Errorf("groupReplacement(%q) is accepted: its group's start is not known", pat)
		}
	}
}

// TestListsNeedTheirVersion: sort and reverse (and items, which sorts) are CEL's lists library,
// which the API server has for new expressions from Kubernetes 1.35: for an earlier target they
// are refused, saying so.
func TestListsNeedTheirVersion(t *testing.T) {
	pod := ObjectShape(Kind{Version: "v1", Kind: "Pod"})
	for _, s := range []string{"sort(split(request.object.metadata.name, '-'))", "reverse(request.object.metadata.name)", "items(request.object.metadata.labels, 'k', 'v')",
		"object_from_lists(split(request.object.metadata.name, '-'), `[]`)"} {
		if _, err := variable(s, Scope{Object: pod, Features: cel.Features{TwoVar: true}}); err == nil || !strings.Contains(err.Error(), "Kubernetes 1.35") {
			t.Errorf("{{%s}} before 1.35: %v, want a refusal naming 1.35", s, err)
		}
		if _, err := variable(s, Scope{Object: pod, Features: cel.Features{Lists: true, TwoVar: true}}); err != nil {
			t.Errorf("{{%s}} from 1.35: %v", s, err)
		}
	}
	// Numbers in the array: Kyverno sorts float64s and fails on int64s.
	if _, err := variable("sort(request.object.spec.words)", Scope{Features: cel.Features{Lists: true}}); err == nil || !strings.Contains(err.Error(), "numbers") {
		t.Errorf("sort of an array that can hold numbers: %v, want a refusal", err)
	}
}

// TestMergeRefusals: merge needs two-variable comprehensions (Kubernetes 1.33), and objects only
// as arguments: Kyverno's merge does not check them and panics on anything else.
func TestMergeRefusals(t *testing.T) {
	pod := ObjectShape(Kind{Version: "v1", Kind: "Pod"})
	for s, want := range map[string]string{
		"merge(request.object.metadata.labels || `{}`, `{\"a\": \"b\"}`)": "Kubernetes 1.33",
	} {
		if _, err := variable(s, Scope{Object: pod}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("{{%s}} before 1.33: %v, want a refusal naming %s", s, err, want)
		}
		if _, err := variable(s, Scope{Object: pod, Features: cel.Features{TwoVar: true}}); err != nil {
			t.Errorf("{{%s}} from 1.33: %v", s, err)
		}
	}
	if _, err := variable("merge(request.object.metadata.labels, `{}`)", Scope{Object: pod, Features: cel.Features{TwoVar: true}}); err == nil || !strings.Contains(err.Error(), "panics") {
		t.Errorf("merge of labels, which can be missing: %v, want a refusal", err)
	}
}

// TestKeysWhereOrderIsFree: keys and values, whose order is Go's random map order in Kyverno, are
// lowered as the argument of sort, length and contains, and refused elsewhere.
func TestKeysWhereOrderIsFree(t *testing.T) {
	pod := ObjectShape(Kind{Version: "v1", Kind: "Pod"})
	sc := Scope{Object: pod, Features: cel.Features{Lists: true, TwoVar: true}}
	for _, s := range []string{"sort(keys(request.object.metadata.labels))", "length(keys(request.object.metadata.annotations))",
		"contains(keys(request.object.metadata.labels), 'app')", "join(',', sort(keys(request.object.spec.nodeSelector)))",
		"sort(values(request.object.metadata.labels))", "length(values(request.object.spec))", "contains(values(request.object.metadata.annotations), 'x')"} {
		if _, err := variable(s, sc); err != nil {
			t.Errorf("{{%s}}: %v", s, err)
		}
	}
	for _, s := range []string{"keys(request.object.metadata.labels)[0]", "join(',', keys(request.object.metadata.labels))",
		"contains('app', keys(request.object.metadata.labels))", "to_array(keys(request.object.metadata.labels))",
		"values(request.object.metadata.labels)[0]", "join(',', values(request.object.metadata.labels))"} {
		if _, err := variable(s, sc); err == nil || !strings.Contains(err.Error(), "random map order") {
			t.Errorf("{{%s}}: %v, want a refusal", s, err)
		}
	}
}

// TestSortValuesNeedsStrings: sort of an object's values needs items that cannot be numbers,
// which the schema says for a map of strings (labels) and not for an object with fields.
func TestSortValuesNeedsStrings(t *testing.T) {
	pod := ObjectShape(Kind{Version: "v1", Kind: "Pod"})
	sc := Scope{Object: pod, Features: cel.Features{Lists: true, TwoVar: true}}
	if _, err := variable("sort(values(request.object.spec.securityContext))", sc); err == nil || !strings.Contains(err.Error(), "numbers") {
		t.Errorf("sort of a Pod security context's values: %v, want a refusal (they can be numbers)", err)
	}
}

// TestOptionalPrefix: regex_replace_all's ^(G)?(.*)$ form is recognised only where G matches no
// line break and has no groups or anchors, the quantifiers are greedy and . excludes \n.
func TestOptionalPrefix(t *testing.T) {
	for _, tc := range []struct {
		pat string
		g   string // "" for not recognised
	}{
		{`^(localhost/|(?:[a-z0-9]+\.)+[a-z0-9]+/)?(.*)$`, `\A(?:localhost/|(?:[0-9a-z]+\.)+[0-9a-z]+/)`},
		{`^(docker\.io/)?(.*)$`, `\Adocker\.io/`},
		{`^([^/]+/)?(.*)$`, ""}, // [^/] matches \n
		{`(?s)^(a/)?(.*)$`, ""}, // . matches \n
		{`(?m)^(a/)?(.*)$`, ""}, // ^ and $ at lines
		{`^(a/)??(.*)$`, ""},    // lazy
		{`^(a/)?(.*?)$`, ""},    // lazy
		{`^((a)/)?(.*)$`, ""},   // a group in G
		{`^(a/)?(.*)`, ""},      // no $
		{`^(\ba/)?(.*)$`, ""},   // an assertion in G
		{`^(a/)?(b)(.*)$`, ""},  // more
	} {
		g, ok := optionalPrefix(tc.pat)
		if ok != (tc.g != "") || ok && g != tc.g {
			t.Errorf("%s: %q, %v; want %q", tc.pat, g, ok, tc.g)
		}
	}
}
