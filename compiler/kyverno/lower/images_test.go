package lower

import (
	"strings"
	"testing"

	"github.com/mapc-dev/mapc/cel"
	"github.com/mapc-dev/mapc/compiler/kyverno"
)

// TestSplices: a variable written inside another one becomes a field the outer one's JMESPath
// names, quoted or bare, or a raw string that is the whole value; elsewhere it is refused;
// variables side by side stay apart.
func TestSplices(t *testing.T) {
	for _, tc := range []struct {
		in    string
		texts []string // each variable's JMESPath
		inner [][]string
		err   string
	}{
		{in: "a{{ x }}b{{y}}", texts: []string{"x", "y"}, inner: [][]string{nil, nil}},
		{in: `{{ images.containers."{{ element.name }}".tag }}`, texts: []string{`images.containers."\u00000".tag`}, inner: [][]string{{"element.name"}}},
		{in: `r/{{images.containers.{{element.name}}.path}}:{{ x }}`, texts: []string{`images.containers."\u00010".path`, "x"}, inner: [][]string{{"element.name"}, nil}},
		{in: `{{ f('{{element.image}}') }}`, texts: []string{"f('\x020')"}, inner: [][]string{{"element.image"}}},
		{in: `{{ f('a/{{element.image}}') }}`, err: "supported only as a field name"},
		{in: `{{ f({{element.image}}) }}`, err: "supported only as a field name"},
		{in: `{{ a.{{ b.{{c}} }} }}`, err: "nested more than one deep"},
	} {
		got, err := splices(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: %v, want an error with %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || len(got) != len(tc.texts) {
			t.Errorf("%s: %v, %v", tc.in, got, err)
			continue
		}
		for i, s := range got {
			if s.text != tc.texts[i] || strings.Join(s.inner, ",") != strings.Join(tc.inner[i], ",") {
				t.Errorf("%s: variable %d is %q with %q, want %q with %q", tc.in, i, s.text, s.inner, tc.texts[i], tc.inner[i])
			}
			if tc.in[s.loc[0]:s.loc[0]+2] != "{{" || tc.in[s.loc[1]-2:s.loc[1]] != "}}" {
				t.Errorf("%s: variable %d at %v", tc.in, i, s.loc)
			}
		}
	}
}

// TestImagesRegistrySettings: images and image_normalize are refused where Kyverno's
// configuration changes its registry settings.
func TestImagesRegistrySettings(t *testing.T) {
	for _, v := range []string{"images.containers.app.tag", "image_normalize(request.object.spec.containers[0].image)"} {
		sc := Scope{Object: ObjectShape(Kind{Version: "v1", Kind: "Pod"}), Features: cel.Features{TwoVar: true}}
		if _, err := variable(v, sc); err != nil {
			t.Errorf("%s with the defaults: %v", v, err)
		}
		sc.Registry = []string{"defaultRegistry: mirror.example"}
		if _, err := variable(v, sc); err == nil || !strings.Contains(err.Error(), "defaultRegistry: mirror.example") {
			t.Errorf("%s with another default registry: %v, want a refusal naming it", v, err)
		}
	}
}

// TestSplicedText: a variable spliced in as a whole raw string must be a string the API server
// keeps tame (a Pod's name, a label's value; an element's image in the golden case
// variables-spliced-text); other values are refused.
func TestSplicedText(t *testing.T) {
	sc := Scope{Object: ObjectShape(Kind{Version: "v1", Kind: "Pod"}), Features: cel.Features{TwoVar: true}}
	for _, tc := range []struct{ inner, err string }{
		{inner: "request.object.metadata.name"},
		{inner: "request.object.metadata.labels.app"},
		{inner: "request.object.spec.containers[0].image", err: "raw string"}, // null past the end
		{inner: "request.object.metadata.annotations.owner", err: "raw string"},
		{inner: "request.object.spec.containers", err: "raw string"},
	} {
		v := `{{ to_upper('{{` + tc.inner + `}}') }}`
		_, _, err := SubstituteCases(map[string]any{"x": v}, sc, "f")
		if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%s: %v, want error %q", v, err, tc.err)
		}
	}
}

// TestSubstituteTextTameness: a quoted JSON patch value splices in strings known to be tame
// (literals, names, label values, and what replace_all, regex_replace_all, to_upper and || make
// of them) and refuses others.
func TestSubstituteTextTameness(t *testing.T) {
	sc := Scope{Object: ObjectShape(Kind{Version: "v1", Kind: "Pod"}), Features: cel.Features{TwoVar: true}}
	for _, tc := range []struct {
		v       string
		refused bool
	}{
		{v: "{{ request.object.metadata.name }}"},
		{v: "x-{{ request.object.metadata.labels.app || 'none' }}"},
		{v: "{{ replace_all(request.object.metadata.name, '-', '.') }}"},
		{v: "{{ regex_replace_all('^[^/]+/', request.object.spec.containers[0].image || '', 'r/') }}"},
		{v: "{{ request.operation }}"},
		{v: "{{ request.object.metadata.annotations.owner }}", refused: true},
		{v: "{{ replace_all(request.object.metadata.name, '-', '\"') }}", refused: true},
		{v: "{{ request.object.metadata.labels.app || request.object.metadata.annotations.app }}", refused: true},
		{v: "{{ request.userInfo.username }}", refused: true},
	} {
		_, _, err := SubstituteText(map[string]any{"x": tc.v}, sc, "value")
		if (err != nil) != tc.refused {
			t.Errorf("%s: %v, want refused %v", tc.v, err, tc.refused)
		}
	}
}

// TestSubstituteTextPlain: an unquoted JSON patch value splices in strings known to hold no
// space (literals, names, label values, images.*, request.operation, and what functions make of
// them) after a literal that makes the scalar a string, and refuses others; checks on run-time
// values where the API server's validation keeps them so, and on a colon at the end (checked
// with the characters too).
func TestSubstituteTextPlain(t *testing.T) {
	sc := Scope{Object: ObjectShape(Kind{Version: "v1", Kind: "Pod"}), Features: cel.Features{TwoVar: true}}
	for _, tc := range []struct {
		v           string
		refused     bool
		word, colon bool // a run-time check of the variable's characters, of a colon at the end
	}{
		{v: "registry.io/{{ images.containers.app.path }}:{{ images.containers.app.tag }}", colon: true},
		{v: "registry.io/{{ images.containers.app.path }}:latest"},
		{v: "x-{{ request.operation }}", colon: true},
		{v: "prefix-{{ request.object.metadata.name }}", word: true, colon: true},
		{v: "prefix-{{ replace_all(request.object.metadata.labels.app || 'none', '.', '-') }}-x", word: true, colon: true},
		{v: "r/{{ request.object.spec.containers[0].image }}", word: true, colon: true},
		{v: "a/{{ request.object.metadata.labels.app || 'n o' }}", refused: true},
		{v: "a/{{ request.object.metadata.annotations.owner }}", refused: true},
		{v: "{{ request.operation }}-x", refused: true},
		{v: "1{{ request.operation }}", refused: true},
		{v: "tr{{ request.operation }}", refused: true},
		{v: "-{{ request.operation }}", refused: true},
		{v: "a b/{{ request.operation }}", refused: true},
		{v: "a/{{ request.operation }} x", refused: true},
	} {
		out, _, err := SubstituteText(map[string]any{"x": kyverno.PlainText(tc.v)}, sc, "value")
		if (err != nil) != tc.refused {
			t.Errorf("%s: %v, want refused %v", tc.v, err, tc.refused)
		}
		if err != nil {
			continue
		}
		text := cel.String(out.(map[string]any)["x"].(expr).e)
		if got := strings.Contains(text, `contains(" #")`); got != tc.word {
			t.Errorf("%s: %s: checks the characters %v, want %v", tc.v, text, got, tc.word)
		}
		if got := strings.Contains(text, `endsWith(":")`); got != tc.colon {
			t.Errorf("%s: %s: checks a colon at the end %v, want %v", tc.v, text, got, tc.colon)
		}
	}
}
