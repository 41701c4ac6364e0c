package lower

import (
	"strings"
	"testing"

	"github.com/blang/semver/v4"

	"github.com/mapc-dev/mapc/cel"
)

// TestSemverRange: the structure semverRange reads gives, for every version, what
// blang/semver's ParseRange gives, and fails where it fails, on ranges of every comparator,
// wildcard, spacing and disjunction.
func TestSemverRange(t *testing.T) {
	ops := []string{"", "=", "==", "!", "!=", ">", ">=", "<", "<=", "> ", ">= ", "<  ", "= "}
	vs := []string{"1.2.3", "1.2.x", "1.x", "1.x.x", "2.0.0-rc.1", "0.0.0", "1.0.0+build.5", "x", "1.2", "1.x.2",
		"01.2.3", "1.2.3-x", "2.x", "0.x", "1.2.3.4", "v1.2.3", "1.2.x-rc", "10.0.0"}
	var ranges []string
	for _, op := range ops {
		for _, v := range vs {
			ranges = append(ranges, op+v)
		}
	}
	ranges = append(ranges, ">=1.0.0 <2.0.0", ">1.0.0 <3.0.0 !2.0.3-beta.2", "<2.0.0 || >=3.0.0",
		">1.0.0 <2.0.0 || >3.0.0 !4.2.1", "  >=1.x   <1.5.0  ", "|| 1.0.0", "1.0.0 ||", "1.0.0 || || 2.0.0",
		">=1.2.x <= 2.x || 3.x", "", " ", "||", "<1.0.0||>2.0.0", ">=1.0.0,<2.0.0", "!=1.2.x 1.x", "=>1.0.0")
	versions := []string{"0.0.0", "0.9.9", "1.0.0", "1.0.0-alpha", "1.0.0+build.5", "1.1.1", "1.2.0", "1.2.2",
		"1.2.3", "1.2.3-rc.1", "1.2.4", "1.3.0", "1.5.0", "1.9.9", "2.0.0", "2.0.0-rc.1", "2.0.3-beta.2",
		"2.5.0", "3.0.0", "3.1.1", "4.2.1", "10.0.0", "11.0.0"}
	parsed := 0
	for _, r := range ranges {
		want, werr := semver.ParseRange(r)
		got, gerr := semverRange(r)
		if werr == nil && gerr == errEmptyAlternative {
			if !panics(func() { want(semver.MustParse("99.0.0")) }) {
				t.Errorf("%q: refused as an empty alternative, but ParseRange's range does not panic", r)
			}
			continue
		}
		if (werr == nil) != (gerr == nil) {
			t.Errorf("%q: ParseRange error %v, semverRange error %v", r, werr, gerr)
			continue
		}
		if werr != nil {
			continue
		}
		parsed++
		for _, s := range versions {
			v := semver.MustParse(s)
			in := false
			for _, and := range got {
				all := true
				for _, c := range and {
					d := v.Compare(semver.MustParse(c.v))
					switch c.op {
					case "==":
						all = all && d == 0
					case "!=":
						all = all && d != 0
					case ">":
						all = all && d > 0
					case ">=":
						all = all && d >= 0
					case "<":
						all = all && d < 0
					case "<=":
						all = all && d <= 0
					default:
						t.Fatalf("%q: comparator %q", r, c.op)
					}
				}
				in = in || all
			}
			if in != want(v) {
				t.Errorf("%q on %s: semverRange gives %v (%v), ParseRange %v", r, s, in, got, want(v))
			}
		}
	}
	if parsed < len(ranges)/2 {
		t.Errorf("only %d of %d ranges parse: the test tries too few", parsed, len(ranges))
	}
}

func panics(f func()) (p bool) {
	defer func() { p = recover() != nil }()
	f()
	return false
}

// TestSemverCompareRefusals: semver_compare needs the API server's semver library (Kubernetes
// 1.34), a literal range, and a range Kyverno can read.
func TestSemverCompareRefusals(t *testing.T) {
	pod := ObjectShape(Kind{Version: "v1", Kind: "Pod"})
	ok := "semver_compare(request.object.metadata.labels.version || '', '>=1.2.x <2.0.0')"
	if _, err := variable(ok, Scope{Object: pod, Features: cel.Features{TwoVar: true}}); err == nil || !strings.Contains(err.Error(), "Kubernetes 1.34") {
		t.Errorf("{{%s}} before 1.34: %v, want a refusal naming 1.34", ok, err)
	}
	semverOn := Scope{Object: pod, Features: cel.Features{TwoVar: true, Semver: true}}
	if _, err := variable(ok, semverOn); err != nil {
		t.Errorf("{{%s}} from 1.34: %v", ok, err)
	}
	for s, want := range map[string]string{
		"semver_compare('1.0.0', request.object.metadata.labels.range || '')": "not a string literal",
		"semver_compare('1.0.0', '>=1.0.0 || || 2.0.0')":                      "empty alternative",
		"semver_compare('1.0.0', '~1.0.0')":                                   "does not parse",
		"semver_compare('1.0.0', '>=1.x.x.x')":                                "does not parse",
	} {
		if _, err := variable(s, semverOn); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("{{%s}}: %v, want a refusal saying %q", s, err, want)
		}
	}
}

// TestVersionConditionNeedsSemver: the ordering operators with a value that reads as a version
// and a key that can be a string compare versions with the semver library, from 1.34.
func TestVersionConditionNeedsSemver(t *testing.T) {
	key := cel.Ident("key")
	if _, err := numericCond("greaterthan", key, tStr, "1.2.3", cel.Features{}, "f"); err == nil || !strings.Contains(err.Error(), "Kubernetes 1.34") {
		t.Errorf("before 1.34: %v, want a refusal naming 1.34", err)
	}
	e, err := numericCond("greaterthan", key, tStr|tInt, "1.2.3", cel.Features{Semver: true}, "f")
	if err != nil || !strings.Contains(cel.String(e), "compareTo") {
		t.Errorf("from 1.34: %v, %v; want a comparison of versions", e, err)
	}
}
