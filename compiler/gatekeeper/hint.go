package gatekeeper

import "strings"

// closest returns the candidate s was most likely meant to be: the one nearest to it in edit
// distance ignoring case (exact case breaking ties), or one that s begins, if it is near enough
// to be a slip of the keyboard rather than another word. ok is false when none is.
func closest(s string, candidates []string) (best string, ok bool) {
	ls := strings.ToLower(s)
	bestD, bestExact := -1, 0
	for _, c := range candidates {
		if c == s {
			continue
		}
		lc := strings.ToLower(c)
		d := distance(ls, lc)
		if d > nearEnough(ls) && !(len(ls) >= 4 && strings.HasPrefix(lc, ls)) {
			continue
		}
		exact := distance(s, c)
		if bestD < 0 || d < bestD || d == bestD && exact < bestExact {
			best, bestD, bestExact = c, d, exact
		}
	}
	return best, bestD >= 0
}

// nearEnough is the largest edit distance from s that still reads as a misspelling of s.
func nearEnough(s string) int {
	switch n := len(s); {
	case n <= 4:
		return 1
	case n <= 11:
		return 2
	}
	return 3
}

// distance is the optimal string alignment distance between a and b: the number of inserted,
// deleted or replaced bytes, or swapped neighbours, that turns one into the other.
func distance(a, b string) int {
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}
