package kyverno

import (
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	yaml3 "go.yaml.in/yaml/v3"
)

// TestQuotedText: the text Kyverno's substitution reads of a quoted patchesJson6902 scalar: the
// variables as written (escapes and doubled quotes in their JMESPath kept, a variable inside
// another one's text part of it), the rest as YAML reads it; scalars on several lines, and
// escapes that reach into a variable or make {{, refused.
func TestQuotedText(t *testing.T) {
	for _, tc := range []struct {
		raw, want, err string
		json           bool
	}{
		{raw: `"a-{{ x }}" # comment`, want: `a-{{ x }}`},
		{raw: `"\x41{{ re('a\\.b', '{{element.image}}') }}\t"`, want: "A{{ re('a\\\\.b', '{{element.image}}') }}\t"},
		{raw: `'it''s {{ x || ''y'' }}'`, want: `it's {{ x || ''y'' }}`},
		{raw: `"{{ x || \"y\" }}"`, want: `{{ x || \"y\" }}`},
		{raw: `"a-{{ x }}`, err: "several lines"},
		{raw: `"a\{{ x }}"`, err: "a backslash before a variable"},
		{raw: `"\x7b{ x }}"`, err: "makes {{"},
		{raw: `"\q{{ x }}"`, err: "text YAML does not read"},
		{raw: `"a-{{ x || \"y\" }}"}]`, want: `a-{{ x || \"y\" }}`, json: true},
		{raw: `"\u0041-{{ x }}"}]`, err: "a JSON string", json: true},
	} {
		got, err := quotedText(tc.raw, tc.raw[0], tc.json)
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: %q, %v; want error %q", tc.raw, got, err, tc.err)
			}
		case err != nil || got != tc.want:
			t.Errorf("%s: %q, %v; want %q", tc.raw, got, err, tc.want)
		}
	}
}

// TestVariableSpans: a variable inside another one's text is part of the outer one.
func TestVariableSpans(t *testing.T) {
	for _, tc := range []struct {
		x    string
		want []string
	}{
		{"a{{ x }}b{{ y }}", []string{"{{ x }}", "{{ y }}"}},
		{"{{ f('{{element.image}}') }}-{{ z }}", []string{"{{ f('{{element.image}}') }}", "{{ z }}"}},
		{"{{ i }}{{ images.c.\"{{element.name}}\".tag }}", []string{"{{ i }}", "{{ images.c.\"{{element.name}}\".tag }}"}},
		{"none", nil},
	} {
		var got []string
		for _, l := range variableSpans(tc.x) {
			got = append(got, tc.x[l[0]:l[1]])
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.x, got, tc.want)
		}
	}
}

// FuzzQuotedText: without variables, the text of a quoted scalar is what YAML reads of it;
// with them, each variable is as written, and the text around it what YAML reads of that part.
func FuzzQuotedText(f *testing.F) {
	for _, s := range []string{`a-{{ x }}`, `\x41{{ re('a\\.b', '{{element.image}}') }}\t`, `it''s`, `\u00e9{{x}}\"`, `{{ a }}{{ b }}`, `a\\`, `{{`, `}}{{x`} {
		f.Add(s, true)
		f.Add(s, false)
	}
	f.Fuzz(func(t *testing.T, inner string, double bool) {
		if !utf8.ValidString(inner) || strings.ContainsAny(inner, "\r\n") {
			return
		}
		q := "'"
		if double {
			q = `"`
		}
		raw := q + inner + q
		unquoted := strings.ReplaceAll(inner, "''", "")
		if double {
			unquoted = strings.NewReplacer(`\\`, "", `\"`, "").Replace(inner)
		}
		if strings.Contains(unquoted, q) {
			return // the scalar ends before
		}
		got, err := quotedText(raw+" # after", q[0], false)
		if err != nil {
			return
		}
		spans := variableSpans(inner)
		at, want := 0, ""
		for _, l := range append(spans, []int{len(inner), len(inner)}) {
			var part string
			if err := yaml3.Unmarshal([]byte(q+inner[at:l[0]]+q), &part); err != nil {
				t.Fatalf("%s: %q, but YAML does not read %s%s%s: %v", raw, got, q, inner[at:l[0]], q, err)
			}
			want += part + inner[l[0]:l[1]]
			at = l[1]
		}
		if got != want {
			t.Fatalf("%s: %q, want %q", raw, got, want)
		}
	})
}

// TestPlainText: the reader marks the plain scalars with variables of an operation's value, and
// only those, wherever they are in it.
func TestPlainText(t *testing.T) {
	ops, err := parseJSON6902(`- op: add
  path: /metadata/annotations
  value:
    a.b: "quoted:{{ request.operation }}"
    a:
      b: plain/{{ request.operation }}
      l:
      - x/{{ request.operation }}
      - 'y-{{ request.operation }}'
    c: no-variable
`)
	if err != nil {
		t.Fatal(err)
	}
	v := ops[0].Value.(map[string]any)
	a := v["a"].(map[string]any)
	l := a["l"].([]any)
	for _, tc := range []struct {
		name  string
		got   any
		plain bool
	}{{"a.b", v["a.b"], false}, {"a/b", a["b"], true}, {"a/l/0", l[0], true}, {"a/l/1", l[1], false}, {"c", v["c"], false}} {
		if _, ok := tc.got.(PlainText); ok != tc.plain {
			t.Errorf("%s: %#v, want plain %v", tc.name, tc.got, tc.plain)
		}
	}
}
