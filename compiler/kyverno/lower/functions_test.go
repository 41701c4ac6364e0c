package lower

import (
	"fmt"
	"strings"
	"testing"
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
// group between literal text only; the group's text is the match without that text.
func TestGroupReplacement(t *testing.T) {
	for _, c := range []struct {
		pat, repl     string
		want          string // parts: text, <0> the match, <1> the group
		before, after int
	}{
		{`^old\.example/(.*)$`, `new.example/$1`, `new.example/|<1>`, 12, 0},
		{`^old/(.*)`, `${1}-x$$`, `<1>|-x$`, 4, 0},
		{`^(w)`, `$1x`, ``, 0, 0}, // $1x names group "1x", which does not exist
		{`^web-(?P<n>[0-9]+)-`, `site-${n}:$0`, `site-|<1>|:|<0>`, 4, 1},
		{`^(a)b$`, `$2[$1]`, `[|<1>|]`, 0, 1},
		{`^é(ß+)`, `$1`, `<1>`, 1, 0},
	} {
		parts, before, after, ok := groupReplacement(c.pat, c.repl)
		var got []string
		for _, p := range parts {
			switch p.group {
			case -1:
				got = append(got, p.text)
			default:
				got = append(got, fmt.Sprintf("<%d>", p.group))
			}
		}
		if !ok || strings.Join(got, "|") != c.want || before != c.before || after != c.after {
			t.Errorf("groupReplacement(%q, %q) = %q, %d, %d, %v; want %q, %d, %d", c.pat, c.repl, strings.Join(got, "|"), before, after, ok, c.want, c.before, c.after)
		}
	}
	for _, pat := range []string{`^(a)(b)`, `^a(b)c(d)`, `^[a-z]+(x)`, `(x)`, `^a(b)[cd]`, `(?m)^a(b)`, `^a*(b)`} {
		if _, _, _, ok := groupReplacement(pat, "$1"); ok {
			t.Errorf("groupReplacement(%q) is accepted: its group's text is not the match without fixed text", pat)
		}
	}
}
