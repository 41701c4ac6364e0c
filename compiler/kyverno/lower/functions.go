package lower

import (
	"maps"
	"slices"
	"strings"

	jmespath "github.com/kyverno/go-jmespath"
)

// function lowers one JMESPath function: its arguments are the values Kyverno passes it (a
// missing one null), and the CEL must fail where Kyverno's function fails (an argument of the
// wrong type fails the rule).
type function struct {
	args  int // how many arguments
	lower func(c *lowering, args []value) (value, error)
}

// functions are the JMESPath functions lowered to CEL, by name.
var functions = map[string]function{}

// call is a function call.
func (c *lowering) call(n jmespath.ASTNode, cur value) (value, error) {
	name, _ := n.Value.(string)
	f, ok := functions[name]
	if !ok {
		return value{}, c.refuse("the JMESPath function %s is not supported yet: %s", name, supportedFunctions())
	}
	if len(n.Children) != f.args {
		return value{}, c.refuse("%s takes %d arguments, not %d: Kyverno fails the rule", name, f.args, len(n.Children))
	}
	args := make([]value, len(n.Children))
	for i, a := range n.Children {
		v, err := c.operand(a, cur)
		if err != nil {
			return value{}, err
		}
		args[i] = v
	}
	return f.lower(c, args)
}

// supportedFunctions says which functions are lowered.
func supportedFunctions() string {
	if len(functions) == 0 {
		return "no function is lowered to CEL so far"
	}
	return "supported: " + strings.Join(slices.Sorted(maps.Keys(functions)), ", ")
}
