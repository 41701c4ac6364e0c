package lower

import "testing"

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
