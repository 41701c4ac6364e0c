package lower

import (
	"strings"
	"testing"

	"github.com/mapc-dev/mapc/cel"
)

// TestConditionValues checks which values each operator compares, by the key's types, and
// which it refuses and why.
func TestConditionValues(t *testing.T) {
	key := cel.Ident("x")
	for _, c := range []struct {
		op     string
		kt     types
		value  any
		refuse string // a part of the refusal; "" when translated
	}{
		{"equals", tStr, "1Gi", ""},
		{"equals", tAny, "1Gi", ""},
		{"equals", tAny, "1000", ""},
		{"equals", tStr, "30s", "reads as a duration"},
		{"equals", tStr, "5m", "reads as a duration"},
		{"equals", tStr, "+0", "reads as a duration"},
		{"equals", tInt, "30s", ""},
		{"equals", tStr, "0", ""},
		{"equals", tInt, "1e3", "not with strconv.ParseInt"},
		{"equals", tInt, "0x1p4", "not with strconv.ParseInt"},
		{"equals", tStr, "1e3", ""},
		{"equals", tInt, "1.5", ""},
		{"equals", tInt, "9007199254740993", "past 2^53"},
		{"equals", tStr, "9007199254740993", ""},
		{"equals", tStr, "1-10", ""},
		{"equals", tAny, "!1-10", ""},
		{"equals", tAny, 3.0, "can be a string"},
		{"equals", tInt | tDouble | tNull, 3.0, ""},
		{"equals", tInt | tDouble, int64(3), ""},
		{"equals", tInt | tDouble, 2.5, ""},
		{"equals", tInt, int64(9007199254740993), "past 2^53"},
		{"equals", tDouble, 1e300, "past 2^53"},
		{"equals", tAny, []any{"a"}, ""},
		{"equals", tAny, map[string]any{"a": true, "b": nil}, ""},
		{"equals", tAny, []any{"a", int64(1)}, "with numbers"},
		{"equals", tAny, map[string]any{"a": []any{2.5}}, "with numbers"},
		{"greaterthan", tInt | tDouble, int64(3), ""},
		{"greaterthan", tInt | tDouble | tBool, 2.5, ""},
		{"greaterthan", tStr | tInt, int64(3), "can be a string"},
		{"greaterthan", tStr, "1Gi", ""},
		{"greaterthan", tStr, "1.5Gi", ""},
		{"greaterthan", tStr, "500m", "reads as a duration"},
		{"greaterthan", tInt, "500m", "can be a number"},
		{"greaterthan", tBool, "500m", ""},
		{"lessthan", tStr, "2", "reads as a number"},
		{"lessthan", tInt | tDouble | tNull, "2", ""},
		{"lessthan", tInt, "inf", "not finite"},
		{"lessthanorequals", tStr, "1.2.3", "Kubernetes 1.34"},
		{"lessthanorequals", tInt, "1.2.3", ""},
		{"greaterthanorequals", tStr, "abc", ""},
		{"greaterthanorequals", tStr, true, "type bool"},
		{"durationgreaterthan", tStr, "30s", "can be a string"},
		{"durationlessthan", tInt, "30s", "can be a number"},
		{"durationlessthan", tBool | tNull, "30s", ""},
	} {
		var err error
		switch {
		case c.op == "equals":
			_, err = equals(key, c.kt, c.value, "f", false)
		case strings.HasPrefix(c.op, "duration"):
			_, err = durationOp(c.op, key, c.kt, "f")
		default:
			_, err = numericCond(c.op, key, c.kt, c.value, cel.Features{}, "f")
		}
		switch {
		case c.refuse == "" && err != nil:
			t.Errorf("%s %v (key %s): refused: %v", c.op, c.value, typeNames(c.kt), err)
		case c.refuse != "" && err == nil:
			t.Errorf("%s %v (key %s): translated, want refused (%s)", c.op, c.value, typeNames(c.kt), c.refuse)
		case c.refuse != "" && !strings.Contains(err.Error(), c.refuse):
			t.Errorf("%s %v (key %s): %v, want %q", c.op, c.value, typeNames(c.kt), err, c.refuse)
		}
	}
}
