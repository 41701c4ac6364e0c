package backend

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/mapc-dev/mapc/cel"
	"github.com/mapc-dev/mapc/compiler/gatekeeper/ir"
	"github.com/mapc-dev/mapc/compiler/gatekeeper/lower"
	"github.com/mapc-dev/mapc/compiler/gatekeeper/plan"
	"github.com/mapc-dev/mapc/compiler/route"
	"github.com/mapc-dev/mapc/emit"
	"github.com/mapc-dev/mapc/internal/par"
)

type mutationError struct {
	m   *ir.Mutation
	err error
}

// groupError refuses the mutators of a group with the one a mutationError names, for one reason.
type groupError struct {
	group []*ir.Mutation
	error
}

// tooLarge is the error of a group of interacting mutators whose policy p the API server would
// not store ("" when it would): they run in order in one policy, so it cannot be divided.
func tooLarge(g []*ir.Mutation, p *emit.Policy) (*mutationError, error) {
	why, err := storable(p)
	if why == "" || err != nil {
		return nil, err
	}
	if len(g) == 1 {
		return &mutationError{g[0], fmt.Errorf("%s: write fewer or smaller values", why)}, nil
	}
	var names []string
	for _, m := range g[:min(len(g), 4)] {
		names = append(names, m.Source.String())
	}
	if len(g) > 4 {
		names = append(names, fmt.Sprintf("and %d more", len(g)-4))
	}
	return &mutationError{g[0], groupError{g, fmt.Errorf("it is one of %d mutators that interact (%s), which run in order in one policy that cannot be divided, and %s: compile fewer of them, or give them matches no object satisfies together", len(g), strings.Join(names, ", "), why)}}, nil
}

// step is one run of one mutation in a fused policy's sequence.
type step struct {
	m *ir.Mutation
	// gen, when not nil, is what its operations are computed from instead of m
	// (plan.OnlyCreating.Test); m is what it is planned as.
	gen *ir.Mutation
	// share, when not nil, is the CreateOnly pair whose By this step is and whose element it
	// appends only where share.M's match does not hold, when both are in one expression
	// (plan.OnlyCreating.SharesCreation).
	share *plan.OnlyCreating
	guard cel.Expr // its complete match
	round int
	unit  int // steps with the same non-zero unit must be in one expression (see units)
	group int // the group it belongs to (steps of different groups never interact)
}

// compileFused emits one policy per set of resources (groups whose rules are the same), with
// every mutation guarded by its complete match. The sequence is, round by round, each group's
// mutations in Gatekeeper's order (groups never interact with each other, so their relative
// order is free); steps that cannot affect each other are moved together (schedule) and fused
// into one JSONPatch expression, whose operations are all computed from the same object. The
// mutations of createOnly are computed only where they create their list element.
func compileFused(env *cel.Env, fz *plan.Fuser, groups []*plan.Group, createOnly []plan.OnlyCreating, opts route.Options) ([]*emit.Policy, []*emit.Policy, [][]*emit.Policy, *mutationError) {
	pr := printer{env}
	computed := map[*ir.Mutation]*ir.Mutation{}
	shares := map[*ir.Mutation]*plan.OnlyCreating{}
	for i, o := range createOnly {
		computed[o.M] = o.Test()
		if fz.SharesCreation(o.M, o.By) {
			shares[o.By] = &createOnly[i]
		}
	}
	type bucket struct {
		key    string
		match  ir.Match
		groups []int
		own    int // groups[:own] are the bucket's own, the rest run for every kind (0: all own)
	}
	buckets := map[string]*bucket{}
	var keys []string
	for gi, g := range groups {
		m := unionMatch(g.Mutations)
		k := rulesKey(m)
		b, ok := buckets[k]
		if !ok {
			b = &bucket{key: k, match: m}
			buckets[k] = b
			keys = append(keys, k)
		}
		b.groups = append(b.groups, gi)
	}
	sort.Strings(keys)
	// The groups for every kind (AssignMetadata, say) may also run inside a kind's policy, whose
	// resources their own policy then excludes: an object of that kind goes through one policy's
	// mutations instead of two (each mutation costs the API server a conversion of the whole
	// object). Groups never interact, so they run in one expression as well as in two policies;
	// each keeps its own guard. Below, a kind's policy keeps them only when that adds it no
	// mutation.
	wild := buckets["*"]
	var excluded []admissionregistrationv1.NamedRuleWithOperations
	if wild != nil && len(keys) > 1 {
		for _, k := range keys {
			if b := buckets[k]; b != wild {
				var own []*ir.Mutation
				for _, gi := range b.groups {
					own = append(own, groups[gi].Mutations...)
				}
				b.match = unionMatch(own)
				b.own = len(b.groups)
				for _, gi := range wild.groups {
					if mayMatchAny(groups[gi].Mutations, b.match.Rules) {
						b.groups = append(b.groups, gi)
					}
				}
			}
		}
	}
	policyOf := make([]*emit.Policy, len(groups))
	alsoIn := make([][]*emit.Policy, len(groups))
	var policies []*emit.Policy
	var wildPolicy *emit.Policy
	// weight: each group's expressions' length, unfused (filled in by weigh).
	weight := map[int]int{}
	var weightMu sync.Mutex // buckets are built in parallel
	// weigh fills in the weights of gis and returns their sum. (A mutation that fails to lower
	// weighs nothing: building its policy reports the error.)
	weigh := func(gis []int) int {
		total := 0
		for _, gi := range gis {
			weightMu.Lock()
			w, ok := weight[gi]
			weightMu.Unlock()
			if !ok {
				for _, m := range groups[gi].Mutations {
					gen := m
					if c := computed[m]; c != nil {
						gen = c
					}
					// As build weighs it, but for the guard: a variable's reference there.
					ops, err := lower.JSONPatch(gen, env.Features())
					if err == nil && !cel.IsEmpty(ops) {
						w += cel.Len(ops) + guardRefLen
					}
				}
				// The rounds after the first repeat the group's steps, whose expressions then
				// share more with the other steps: each added about 0.4 of the first round's
				// length in generated sets of thousands of mutators (bench/cmd/genmutators).
				w = w * (10 + 4*(max(groups[gi].Rounds, 1)-1)) / 10
				weightMu.Lock()
				weight[gi] = w
				weightMu.Unlock()
			}
			total += w
		}
		return total
	}
	// estimate is what the policy of the groups gis would be against one policy's size.
	estimate := func(gis []int) float64 {
		return float64(weigh(gis)) * jsonPerChar / emit.SplitObjectBytes
	}
	// build compiles a bucket into its policy (nil when nothing can be written).
	build := func(b *bucket) (*emit.Policy, *mutationError) {
		var srcs []ir.Source
		guards := map[*ir.Mutation]cel.Expr{}
		opsOf := map[*ir.Mutation]cel.Expr{} // each mutation's operations, unfused
		var members []*ir.Mutation
		for _, gi := range b.groups {
			members = append(members, groups[gi].Mutations...)
		}
		if b.own == 0 {
			b.match = unionMatch(members)
		}
		labels := labelVariables(members)
		for _, gi := range b.groups {
			g := groups[gi]
			for _, m := range g.Mutations {
				srcs = append(srcs, m.Source)
				guard, err := fullGuard(m)
				if err != nil {
					return nil, &mutationError{m, err}
				}
				// The policy only runs for its own rules: what the guard tests of the request's
				// kind and operation is often decided by them.
				guard = lower.AssumeRequest(guard, b.match.Rules)
				gen := m
				if c := computed[m]; c != nil {
					gen = c
				}
				ops, err := lower.JSONPatch(gen, env.Features())
				if err != nil {
					return nil, &mutationError{m, err}
				}
				if cel.IsEmpty(ops) {
					continue // it can never write anything
				}
				guards[m], opsOf[m] = guard, labels.Replace(assumeRequest(m, ops, b.match.Rules))
			}
		}
		// Each distinct guard becomes a policy variable, evaluated once per expression however
		// many steps and shared-node conditions use it.
		parts, vars, merr := guardVariables(pr, members, guards)
		if merr != nil {
			return nil, merr
		}
		// The label selectors' variables, all declared for checking; only those the
		// mutations use are written.
		labelVars, lerr := printVariables(pr, labels.All())
		if lerr != nil {
			return nil, &mutationError{members[0], lerr}
		}
		checker, verr := env.WithVariables(append(append(append([]cel.Variable(nil), parts...), vars...), labelVars...))
		if verr != nil {
			return nil, &mutationError{members[0], verr}
		}
		// Every guard is a boolean variable, so that a step's operations under it are checked
		// without it (fusedParts): shapes then repeat across steps with different matches.
		for _, m := range members {
			if name, ok := cel.AsVarRef(guards[m]); ok {
				if t := checker.VariableType(name); t != "bool" {
					return nil, &mutationError{m, fmt.Errorf("internal error: the match variable %s is of type %s, not bool", name, t)}
				}
			}
		}
		seq := sequence(groups, b.groups, guards)
		for i := range seq {
			seq[i].gen, seq[i].share = computed[seq[i].m], shares[seq[i].m]
		}
		// Fuse pairwise independent steps, keeping each expression well below the API server's
		// limit on expression length: the steps are first reordered as far as their dependencies
		// allow (schedule), then runs of consecutive fusable steps become one expression each.
		size := map[*ir.Mutation]int{}
		// joined: what a merge adds to the union of merges into its list it joins (at most).
		joined := map[*ir.Mutation]int{}
		for _, st := range seq {
			if _, ok := size[st.m]; !ok {
				size[st.m] = cel.Len(cel.Guarded(st.guard, opsOf[st.m]))
				if fz.UnionKey(st.m) != "" {
					joined[st.m] = unionSize(st, setValues(st.m), labels)
				}
			}
		}
		// sizeIn is what the steps of c add to the expression of batch, c's own steps first.
		sizeIn := func(c, batch []step) int {
			n := 0
			for i, s := range c {
				j, ok := joined[s.m]
				if ok && (unites(fz, s, batch) || unites(fz, s, c[:i])) {
					n += min(j, size[s.m])
				} else {
					n += size[s.m]
				}
			}
			return n
		}
		var muts []emit.Mutation
		checked := map[string]bool{}
		var taken []string
		for _, v := range append(append(append([]cel.Variable(nil), parts...), vars...), labelVars...) {
			taken = append(taken, v.Name)
		}
		keys := cel.NewKeyLists(minKeyLookups, taken)
		var wholes []cel.Expr
		chunks := schedule(fz, seq)
		var contents []emit.Contents
		bins := pack(fz, chunks, sizeIn, env.Features().Flatten)
		for bi, bin := range bins {
			batch := bin.steps
			prevAfter, prevWhy := "", ""
			if bi > 0 {
				prevAfter, prevWhy = bin.after, bin.why
			}
			c := emit.Contents{After: prevAfter, Why: prevWhy, LeavesOut: leavesOut(fz, batch)}
			for _, s := range batch {
				c.Steps = append(c.Steps, emit.Step{Source: emitSource(s.m.Source), Round: s.round + 1})
			}
			contents = append(contents, c)
			e, parts, err := fusedParts(env, fz, batch, opsOf, b.match.Rules, labels)
			if err != nil {
				return nil, &mutationError{batch[0].m, err}
			}
			// The parts are checked as built; the lookups the key lists replace keep every
			// part's type (see cel.KeyLists), and the variables are checked below.
			e = keys.Hoist(e)
			wholes = append(wholes, e)
			text, err := pr.jsonPatchOfParts(e, parts, checked, checker.ListPieces, checker.CheckJSONPatchExpr)
			if err != nil {
				return nil, &mutationError{batch[0].m, err}
			}
			muts = append(muts, emit.Mutation{PatchType: admissionregistrationv1.PatchTypeJSONPatch, Expression: text})
		}
		if len(muts) == 0 {
			return nil, nil
		}
		used, verr := printVariables(pr, labels.Used(wholes...))
		if verr != nil {
			return nil, &mutationError{members[0], verr}
		}
		vars = append(append(parts, vars...), used...)
		if kv := keys.Variables(); len(kv) > 0 {
			printed, err := printVariables(pr, kv)
			if err != nil {
				return nil, &mutationError{members[0], err}
			}
			vars = append(vars, printed...)
			// They read only the object (cel.KeyLists): compiled by themselves, not again
			// after every other variable, which a policy of thousands of mutators has thousands of.
			if _, verr = env.WithVariables(printed); verr != nil {
				return nil, &mutationError{members[0], verr}
			}
		}
		if cel.SelfChecking() {
			if checker, verr = env.WithVariables(vars); verr != nil {
				return nil, &mutationError{members[0], verr}
			}
			for _, whole := range wholes {
				if err := checker.CheckJSONPatchExpr(whole); err != nil {
					return nil, &mutationError{members[0], fmt.Errorf("the compacted expression does not compile although its parts do: %v", err)}
				}
			}
		}
		sort.Slice(srcs, func(i, j int) bool { return srcs[i].Kind+"/"+srcs[i].Name < srcs[j].Kind+"/"+srcs[j].Name })
		conds, err := installConditions(env, opts)
		if err != nil {
			return nil, &mutationError{groups[b.groups[0]].Mutations[0], err}
		}
		var evars []emit.Variable
		for _, v := range vars {
			evars = append(evars, emit.Variable{Name: v.Name, Expression: v.Expression})
		}
		p, err := newPolicy(fusedName(b.match, emit.NewResources(opts.CRDs)), srcs, b.match, conds, evars, muts, opts)
		if err != nil {
			return nil, &mutationError{groups[b.groups[0]].Mutations[0], err}
		}
		p.Contents = contents
		return p, nil
	}
	// split is whole, a bucket's policy, with the groups in it, or, when whole is too large for
	// the API server (emit.Policy.Oversize), the bucket compiled again into several policies
	// that fit, each with some of its groups: groups never interact, so they run in several
	// policies, in any order, as well as in one. The groups are divided in their order, by the
	// length of their expressions, each part divided again while it is too large; a part of one
	// group stays whole (emit refuses it if it is too large to store).
	var split func(b *bucket, whole *emit.Policy) ([]*emit.Policy, [][]int, *mutationError)
	var divideBy func(b *bucket, over float64, whole *emit.Policy) ([]*emit.Policy, [][]int, *mutationError)
	split = func(b *bucket, whole *emit.Policy) ([]*emit.Policy, [][]int, *mutationError) {
		if whole == nil {
			return nil, nil, nil
		}
		over, jerr := whole.Oversize()
		if jerr != nil {
			return nil, nil, &mutationError{groups[b.groups[0]].Mutations[0], jerr}
		}
		return divideBy(b, over, whole)
	}
	// divideBy is split for a bucket whose policy is over times what one policy may be (whole
	// is that policy, or nil when it was not built).
	divideBy = func(b *bucket, over float64, whole *emit.Policy) ([]*emit.Policy, [][]int, *mutationError) {
		if over <= splitAt || len(b.groups) < 2 {
			if whole == nil {
				p, err := build(b)
				if err != nil {
					return nil, nil, err
				}
				return split(b, p)
			}
			if len(b.groups) == 1 {
				merr, jerr := tooLarge(groups[b.groups[0]].Mutations, whole)
				if jerr != nil {
					return nil, nil, &mutationError{m: groups[b.groups[0]].Mutations[0], err: jerr}
				}
				if merr != nil {
					return nil, nil, merr
				}
			}
			return []*emit.Policy{whole}, [][]int{b.groups}, nil
		}
		// A margin, since the weights only estimate each group's share of the policy.
		n := min(int(math.Ceil(over/splitAt*1.1)), len(b.groups))
		var parts []*emit.Policy
		var partGroups [][]int
		weigh(b.groups)
		// The parts are built on every core (build reads what the buckets share), then each
		// is divided again where it is still too large.
		heavy := map[int]bool{}
		for _, gi := range b.groups {
			heavy[gi] = estimate([]int{gi}) > splitAt
		}
		weightMu.Lock()
		divided := isolate(divide(b.groups, weight, n), func(gi int) bool { return heavy[gi] })
		weightMu.Unlock()
		subs := make([]bucket, len(divided))
		built := make([]*emit.Policy, len(divided))
		errs := make([]*mutationError, len(divided))
		par.Do(len(divided), func(i int) {
			subs[i] = *b
			subs[i].groups, subs[i].own = divided[i], 0
			built[i], errs[i] = build(&subs[i])
		})
		for i := range divided {
			if errs[i] != nil {
				return nil, nil, errs[i]
			}
			ps, pgs, err := split(&subs[i], built[i])
			if err != nil {
				return nil, nil, err
			}
			parts, partGroups = append(parts, ps...), append(partGroups, pgs...)
		}
		return parts, partGroups, nil
	}
	// buildSplit builds b and splits it, the parts named after the whole with -part-1,
	// -part-2, ...; a bucket whose expressions are far longer than one policy holds is divided
	// before it is built whole, which would only be thrown away.
	buildSplit := func(b *bucket, whole *emit.Policy) ([]*emit.Policy, [][]int, *mutationError) {
		var ps []*emit.Policy
		var pgs [][]int
		var err *mutationError
		if whole == nil && len(b.groups) > 1 {
			if over := estimate(b.groups); over > preSplitAt*splitAt {
				if ps, pgs, err = divideBy(b, over, nil); err != nil {
					return nil, nil, err
				}
			}
		}
		if ps == nil {
			if whole == nil {
				if whole, err = build(b); err != nil {
					return nil, nil, err
				}
			}
			if ps, pgs, err = split(b, whole); err != nil || len(ps) < 2 {
				return ps, pgs, err
			}
		}
		name := fusedName(b.match, emit.NewResources(opts.CRDs))
		for i, p := range ps {
			if rerr := p.Rename(name + "-part-" + strconv.Itoa(i+1)); rerr != nil {
				return nil, nil, &mutationError{groups[pgs[i][0]].Mutations[0], rerr}
			}
		}
		return ps, pgs, nil
	}
	// compileBucket compiles one bucket into its policies (parts when it is split), each with
	// its groups; merged: the bucket's policy runs the groups for every kind too.
	compileBucket := func(b *bucket) (ps []*emit.Policy, partGroups [][]int, merged bool, merr *mutationError) {
		if b != wild && b.own > 0 && b.own < len(b.groups) {
			// Keep the groups for every kind in this kind's policy only if that costs this
			// kind's objects no mutation more than its own groups alone (they then skip the
			// policy for every kind, and its mutations, altogether), and it fits in one policy.
			own := *b
			own.groups = b.groups[:b.own]
			var alone *emit.Policy
			var err *mutationError
			// Far too large for one policy, this kind's groups are divided before they are
			// built, and (larger still) with the groups for every kind they would not fit.
			small := estimate(own.groups) <= preSplitAt*splitAt
			if small {
				if alone, err = build(&own); err != nil {
					return nil, nil, false, err
				}
			}
			if small && wildPolicy != nil && len(wildPolicy.Policy.Spec.Mutations) <= maxMergedWild {
				with, err := build(b)
				if err != nil {
					return nil, nil, false, err
				}
				if with != nil && (alone == nil || len(with.Policy.Spec.Mutations) <= len(alone.Policy.Spec.Mutations)) {
					over, jerr := with.Oversize()
					if jerr != nil {
						return nil, nil, false, &mutationError{groups[b.groups[0]].Mutations[0], jerr}
					}
					if over <= splitAt {
						return []*emit.Policy{with}, [][]int{b.groups}, true, nil
					}
				}
			}
			ps, partGroups, err = buildSplit(&own, alone)
			return ps, partGroups, false, err
		}
		ps, partGroups, merr = buildSplit(b, nil)
		return ps, partGroups, false, merr
	}
	// The policy for every kind comes first (keys are sorted, and "*" sorts before any
	// group/version/kind): the kinds' buckets read it. They are then compiled on every core,
	// and their results taken in the keys' order, so that the output and the first error
	// reported never depend on scheduling.
	type compiled struct {
		ps         []*emit.Policy
		partGroups [][]int
		merged     bool
		err        *mutationError
	}
	results := make([]compiled, len(keys))
	first := 0
	if len(keys) > 0 && buckets[keys[0]] == wild {
		r := &results[0]
		r.ps, r.partGroups, r.merged, r.err = compileBucket(wild)
		if r.err != nil {
			return nil, nil, nil, r.err
		}
		if len(r.ps) == 1 {
			// Only a policy for every kind in one piece is merged into kinds' policies.
			wildPolicy = r.ps[0]
		}
		first = 1
	}
	par.Do(len(keys)-first, func(i int) {
		r := &results[first+i]
		r.ps, r.partGroups, r.merged, r.err = compileBucket(buckets[keys[first+i]])
	})
	for ki := range keys {
		ps, partGroups, merged, err := results[ki].ps, results[ki].partGroups, results[ki].merged, results[ki].err
		if err != nil {
			return nil, nil, nil, err
		}
		for i, p := range ps {
			for _, gi := range partGroups[i] {
				if policyOf[gi] == nil {
					policyOf[gi] = p
				} else {
					alsoIn[gi] = append(alsoIn[gi], p)
				}
			}
			policies = append(policies, p)
		}
		if merged {
			excluded = append(excluded, ps[0].Policy.Spec.MatchConstraints.ResourceRules...)
		}
	}
	if wildPolicy != nil && len(excluded) > 0 {
		wildPolicy.Policy.Spec.MatchConstraints.ExcludeResourceRules = excluded
	}
	return policies, policyOf, alsoIn, nil
}

// storable is emit.Policy.Storable (tests make the limits smaller).
var storable = (*emit.Policy).Storable

// splitAt is the emit.Policy.Oversize above which a policy is split (tests make it smaller).
var splitAt = 1.0

// jsonPerChar estimates the bytes of a fused policy in JSON per character of its mutations'
// expressions unfused (weigh): fusing shortens them little, and the variables and JSON's escapes
// add (measured 1.2–1.3 on generated sets of thousands of mutators).
const jsonPerChar = 1.3

// preSplitAt: a bucket estimated (jsonPerChar) at more than preSplitAt times splitAt is divided
// before it is built whole.
const preSplitAt = 2.0

// guardRefLen is about what a reference to a guard variable adds to a mutation's operations.
const guardRefLen = 40

// divide cuts gis into n consecutive non-empty parts of about equal weight (n at most len(gis)).
func divide(gis []int, weight map[int]int, n int) [][]int {
	total := 0
	for _, gi := range gis {
		total += max(weight[gi], 1)
	}
	var parts [][]int
	start, acc := 0, 0
	for i, gi := range gis {
		acc += max(weight[gi], 1)
		left := len(gis) - (i + 1) // groups after this one
		need := n - len(parts) - 1 // parts still to fill after the one this closes
		if need == 0 {
			continue
		}
		if left == need || acc*n >= total*(len(parts)+1) {
			parts = append(parts, gis[start:i+1])
			start = i + 1
		}
	}
	return append(parts, gis[start:])
}

// isolate splits each part around every group alone(gi) says is too large for one policy by
// itself, so that such a group's part is built once, with nothing else in it, instead of being
// built with its neighbours and found too large.
func isolate(parts [][]int, alone func(gi int) bool) [][]int {
	var out [][]int
	for _, p := range parts {
		start := 0
		for i, gi := range p {
			if len(p) > 1 && alone(gi) {
				if start < i {
					out = append(out, p[start:i])
				}
				out = append(out, p[i:i+1])
				start = i + 1
			}
		}
		if start < len(p) {
			out = append(out, p[start:])
		}
	}
	return out
}

// sequence is the steps of the groups gis in Gatekeeper's order, round by round (each group for
// its own number of rounds), each group's coupled mutations as one unit (see units); only the
// mutations with a guard, unless guards is nil.
func sequence(groups []*plan.Group, gis []int, guards map[*ir.Mutation]cel.Expr) []step {
	rounds := 0
	for _, gi := range gis {
		rounds = max(rounds, groups[gi].Rounds)
	}
	var seq []step
	unitID := 0
	for r := 0; r < rounds; r++ {
		for _, gi := range gis {
			g := groups[gi]
			if g.Rounds <= r {
				continue
			}
			us, _ := units(g)
			for _, u := range us {
				id := 0
				if len(u) > 1 {
					unitID++
					id = unitID
				}
				for _, m := range u {
					guard, ok := guards[m]
					if ok || guards == nil {
						seq = append(seq, step{m: m, guard: guard, round: r, unit: id, group: gi})
					}
				}
			}
		}
	}
	return seq
}

// schedule splits seq into its chunks (one step, or the steps of one coupled unit, which must
// stay together) and reorders them as far as dependencies allow, so that fusable steps end up
// next to each other: each chunk is placed one layer after the last earlier chunk of its group
// that it cannot be fused with (which it then must follow, as in seq), and the chunks are
// emitted layer by layer, in seq's order within a layer (a chunk that may only be fused after an
// earlier one, plan.Fuser.FusableInOrder, goes no earlier than its layer). Every pair of chunks
// that do not commute keeps its order, so the sequence computes what seq does; steps of different groups
// never interact (plan.Plan), and only a group's own chunks are compared.
func schedule(fz *plan.Fuser, seq []step) [][]step {
	chunks := chunksOf(seq)
	layer := layers(fz, chunks)
	order := make([]int, len(chunks))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return layer[order[a]] < layer[order[b]] })
	out := make([][]step, len(chunks))
	for i, c := range order {
		out[i] = chunks[c]
	}
	return out
}

// chunksOf splits seq into its chunks: one step, or the steps of one coupled unit.
func chunksOf(seq []step) [][]step {
	var chunks [][]step
	for i := 0; i < len(seq); {
		j := i + 1
		for seq[i].unit != 0 && j < len(seq) && seq[j].unit == seq[i].unit {
			j++
		}
		chunks = append(chunks, seq[i:j])
		i = j
	}
	return chunks
}

// layers is the layer of each chunk (see schedule): the highest that an earlier chunk of its
// group forces, one layer after one it cannot be fused with, or the layer of one it may only
// follow. The earlier chunks are compared from the highest layer down, and no further once their
// layer is below the chunk's: those can force none higher.
func layers(fz *plan.Fuser, chunks [][]step) []int {
	layer := make([]int, len(chunks))
	// byLayer holds each group's chunks placed so far, by layer.
	byLayer := map[int][][]int{}
	// last is the chunk that last ran each mutation (an earlier round): a mutation is never
	// fused with itself, so the chunk goes at least one layer above it, and the layers below
	// need no look.
	last := map[*ir.Mutation]int{}
	for c, ch := range chunks {
		g := ch[0].group
		placed := byLayer[g]
		for _, st := range ch {
			if p, ok := last[st.m]; ok && fz.WhyNotInOrder(st.m, st.m) != "" {
				layer[c] = max(layer[c], layer[p]+1)
			}
			last[st.m] = c
		}
		for l := len(placed) - 1; l >= layer[c]; l-- {
			for _, p := range placed[l] {
				switch {
				case !allFusable(fz, chunks[p], ch, true):
					layer[c] = max(layer[c], l+1)
				case l > layer[c] && !allFusable(fz, chunks[p], ch, false):
					// Fusable only after p (appends to one list): never before it. (At
					// layer[c] already, that changes nothing: not asked.)
					layer[c] = l
				}
				if layer[c] > l {
					break
				}
			}
		}
		for len(placed) <= layer[c] {
			placed = append(placed, nil)
		}
		placed[layer[c]] = append(placed[layer[c]], c)
		byLayer[g] = placed
	}
	return layer
}

// maxMergedWild bounds the mutations of the policy for every kind that compileFused tries to
// merge into each kind's policy (a large one would rarely fit, and would be compiled again for
// every kind).
const maxMergedWild = 4

// mayMatchAny: could a mutation of ms apply to a kind of rules (by its own kinds)?
func mayMatchAny(ms []*ir.Mutation, rules []ir.Rule) bool {
	for _, m := range ms {
		for _, r := range rules {
			if m.Match.MayMatchKind(r.Group, r.Kind) {
				return true
			}
		}
	}
	return false
}

// jsonPatchOfParts prints a fused expression and checks it part by part: each part is a
// list of JSONPatch operations, and so is their concatenation (parts iterating over one list
// are checked before cel.MergeLoops shares their loop: it keeps each body's type). (cel-go's
// checker takes time quadratic in the number of generic calls in one expression, which made
// checking large fused expressions whole the bulk of compile time.) Each part is checked in
// the pieces that decide its type (pieces, cel.Checker.ListPieces), but empty lists, which are
// list(dyn) alone: a part whose piece does not compile alone is checked whole. Pieces and parts
// already checked (a step repeated in a later round, or of the same shape) are not checked
// again: checked holds each shape's outcome, true where it compiled.
func (p printer) jsonPatchOfParts(whole cel.Expr, parts []cel.Expr, checked map[string]bool, pieces func(...cel.Expr) []cel.Expr, check func(cel.Expr) error) (string, error) {
	if len(parts) == 0 {
		parts = []cel.Expr{whole} // nothing but empty lists: check the whole, as the API server will
	}
	// Printed first: it refuses an expression longer than the API server parses.
	text, err := p.env.Print(whole) // checked whole in tests (cel.SelfCheck) by the caller
	if err != nil {
		return "", err
	}
	keys := make([][]string, len(parts))
	var todo []cel.Expr
	var todoKeys []string
	for i, part := range parts {
		ps := pieces(part)
		ps = slices.DeleteFunc(ps, cel.IsEmpty)
		if len(ps) == 0 {
			ps = []cel.Expr{part}
		}
		for _, piece := range ps {
			key := cel.Shape(piece)
			keys[i] = append(keys[i], key)
			if _, seen := checked[key]; !seen {
				checked[key] = true
				todo, todoKeys = append(todo, piece), append(todoKeys, key)
			}
		}
	}
	// The checks are independent: run them on every core.
	errs := make([]error, len(todo))
	par.Do(len(todo), func(i int) { errs[i] = check(todo[i]) })
	for i, err := range errs {
		if err != nil {
			checked[todoKeys[i]] = false
		}
	}
	for i, part := range parts {
		for _, key := range keys[i] {
			if !checked[key] {
				if err := check(part); err != nil {
					return "", err
				}
				break
			}
		}
	}
	return text, nil
}

// bin is the steps of one fused mutation, their expression's length (at most), and why the
// chunk that opened it joins no earlier mutation (after: the step it cannot follow in one
// expression, if one; why: the reason).
type bin struct {
	steps      []step
	total      int
	after, why string
}

// pack puts the chunks, in schedule's order, into mutations: each into the earliest mutation it
// can join (fusable after its steps, within maxFusedLength, and sharing no node inside list
// elements unless flatten is there) among those it may move before, which are the last one
// and, going back (at most maxPackBack), each one whose steps all commute with it
// (plan.Fuser.Commute: either order gives the same object, so running it earlier changes
// nothing). Chunks that do not commute keep their order; a chunk that fits nowhere opens a new
// mutation at the end. sizeIn is what a chunk adds to a mutation's expression.
func pack(fz *plan.Fuser, chunks [][]step, sizeIn func(c, batch []step) int, flatten bool) []*bin {
	var bins []*bin
	for _, c := range chunks {
		best, add := -1, 0
		after, why := "", ""
		for k := len(bins) - 1; k >= 0 && k >= len(bins)-maxPackBack; k-- {
			b := bins[k]
			n := sizeIn(c, b.steps)
			var a, r string
			switch x, _, cr := conflict(fz, b.steps, c); {
			case b.total+n > maxFusedLength:
				r = fmt.Sprintf("the expression before it reached %d characters", maxFusedLength)
			case cr != "":
				a, r = fmt.Sprintf("%s (round %d)", x.m.Source, x.round+1), cr
			case !flatten && sharesInsideLists(fz, b.steps, c):
				r = "computed together they would create a node inside list elements once for both, which needs lists.flatten() (Kubernetes 1.35+)"
			}
			if k == len(bins)-1 {
				after, why = a, r
			}
			if r == "" {
				best, add = k, n
			}
			if !commutesAll(fz, c, b.steps) {
				break
			}
		}
		if best < 0 {
			bins = append(bins, &bin{steps: append([]step(nil), c...), total: sizeIn(c, nil), after: after, why: why})
			continue
		}
		bins[best].steps = append(bins[best].steps, c...)
		bins[best].total += add
	}
	return bins
}

// maxPackBack bounds how many mutations back pack looks for room for a chunk: each look
// compares the chunk with every step of a mutation, and a policy of thousands of mutators has
// hundreds of mutations.
const maxPackBack = 4

// commutesAll: does every step of c commute with every step of batch?
func commutesAll(fz *plan.Fuser, c, batch []step) bool {
	for _, x := range c {
		for _, y := range batch {
			if !fz.Commute(x.m, y.m) {
				return false
			}
		}
	}
	return true
}

// conflict finds a step of a and a step of b (which follows a) that cannot be fused, and why
// ("" when none).
func conflict(fz *plan.Fuser, a, b []step) (step, step, string) {
	for _, x := range a {
		for _, y := range b {
			if r := fz.WhyNotInOrder(x.m, y.m); r != "" {
				return x, y, r
			}
		}
	}
	return step{}, step{}, ""
}

// sharesInsideLists: would a and b together need a shared node (plan.SharedCreations) inside
// list elements? Creating it once for all of them needs lists.flatten() (Kubernetes 1.35+).
func sharesInsideLists(fz *plan.Fuser, a, b []step) bool {
	var ms []*ir.Mutation
	for _, s := range append(append([]step(nil), a...), b...) {
		ms = append(ms, s.m)
	}
	shared, _ := fz.SharedCreations(ms)
	for _, n := range shared {
		for _, st := range n.Path {
			if st.List {
				return true
			}
		}
	}
	return false
}

// allFusable: can every step of b be fused with every step of a (inOrder: after it)?
func allFusable(fz *plan.Fuser, a, b []step, inOrder bool) bool {
	for _, x := range a {
		for _, y := range b {
			if inOrder && !fz.FusableInOrder(x.m, y.m) || !inOrder && !fz.Fusable(x.m, y.m) {
				return false
			}
		}
	}
	return true
}

// maxFusedLength bounds the (unformatted) length of a fused expression, from what the API
// server does with it. It parses at most cel.MaxExpressionCodePoints, which cel.Env.Print
// enforces. And it type-checks each expression whole when the policy is written (and when it
// starts): cel-go's checker takes time quadratic in the generic calls of one expression,
// 0.1–0.35 s for 20,000 characters, 0.25–0.55 s for 40,000 and 1–2.5 s for 65,000–90,000 (one
// core of a busy two-core machine). 40,000 keeps a mutation's check under a second, where a cut
// costs a mutation on every request. (mapc itself checks the parts, in linear time.)
const maxFusedLength = 40000

// fusedPatch is one JSONPatch expression for a batch of independent steps: first the object
// nodes several of them would create (each once, empty), then every step's operations, all
// computed from the same object.
func fusedPatch(env *cel.Env, batch []step) (cel.Expr, error) {
	e, _, err := fusedParts(env, plan.NewFuser(), batch, nil, nil, nil)
	return e, err
}

// assumeRequest is ops (m's operations) for requests that match rules (the policy's), when
// they test the request's kind: the values of fromMetadata (a Namespace's own name) and the
// conditions of completions (lower.CompletionGuard).
func assumeRequest(m *ir.Mutation, ops cel.Expr, rules []ir.Rule) cel.Expr {
	if sv, ok := m.Op.(ir.SetValue); ok && sv.FromMetadata != "" || len(m.Completions) > 0 {
		return lower.AssumeRequest(ops, rules)
	}
	return ops
}

// sharedCreationOps are the operations of s, the By of a CreateOnly pair whose M (guarded by
// guardM, its match but for the object's labels) is in the same expression: where the element
// is, s's as always (it replaces it); where it is missing, only where M's match does not hold
// (else M appends it, with the very value).
func sharedCreationOps(env *cel.Env, s step, guardM cel.Expr, assume int, rules []ir.Rule) (cel.Expr, error) {
	labels, err := cel.LabelsMatch(s.share.M.Match.LabelSelector)
	if err != nil {
		return nil, err
	}
	// (No test of s's own there: SharesCreation.)
	e := s.share.Elem
	a, err := lower.JSONPatchAssuming(s.m.WithTest(e, true, false), env.Features(), assume)
	if err != nil {
		return nil, err
	}
	b, err := lower.JSONPatchAssuming(s.m.WithTest(e, false, true), env.Features(), assume)
	if err != nil {
		return nil, err
	}
	a = assumeRequest(s.m, a, rules)
	switch byM := cel.And(guardM, labels); byM {
	case cel.True:
		return a, nil // M appends it wherever it is missing
	case cel.False:
		return cel.Bin("+", a, assumeRequest(s.m, b, rules)), nil
	default:
		return cel.Bin("+", a, cel.Guarded(cel.Not(byM), assumeRequest(s.m, b, rules))), nil
	}
}

// fusedParts is fusedPatch, also returning the parts it concatenates. opsOf, if not nil, holds
// the steps' operations as lower.JSONPatch gives them (reused where no shared node is assumed);
// rules, if not nil, are the policy's (assumeRequest); labels, if not nil, the policy's label
// selector variables (labelVariables), which every part refers to in place of the tests.
func fusedParts(env *cel.Env, fz *plan.Fuser, batch []step, opsOf map[*ir.Mutation]cel.Expr, rules []ir.Rule, labels *cel.Named) (cel.Expr, []cel.Expr, error) {
	var parts, checkParts []cel.Expr
	ms := make([]*ir.Mutation, len(batch))
	guardOf := map[*ir.Mutation]cel.Expr{}
	for i, s := range batch {
		ms[i] = s.m
		guardOf[s.m] = s.guard
	}
	shared, assume := fz.SharedCreations(ms)
	var e cel.Expr
	if len(shared) > 0 {
		nodes := make([]lower.SharedNode, len(shared))
		for i, n := range shared {
			var when []cel.Expr
			seen := map[string]bool{}
			for _, m := range n.Creators {
				lg, err := cel.LabelsMatch(m.Match.LabelSelector)
				if err != nil {
					return nil, nil, err
				}
				w := cel.And(guardOf[m], lg)
				if k := cel.String(w); !seen[k] {
					seen[k] = true
					when = append(when, w)
				}
			}
			nodes[i] = lower.SharedNode{Path: n.Path, When: cel.Or(when...), List: n.Creators[0].Path[len(n.Path)].List}
		}
		pre, err := lower.PreCreate(nodes, env.Features())
		if err != nil {
			return nil, nil, err
		}
		pre = labels.Replace(pre)
		e = pre
		if !cel.IsEmpty(pre) {
			parts, checkParts = append(parts, pre), append(checkParts, pre)
		}
	}
	// The steps of a batch are pairwise independent but for appends to one list, which must
	// keep their order (plan.Fuser.FusableInOrder), so their operations may come in any order
	// after the shared creations as long as those keep theirs: sorted by path (appends to one
	// list under one key, plan.AppendKey, in the batch's order), steps on one subtree are
	// neighbours and Compact can test each node once for all of them.
	byPath := append([]step(nil), batch...)
	sortKey := func(m *ir.Mutation) string {
		if k := plan.AppendKey(m); k != "" {
			return k
		}
		return ir.PathString(m.Path)
	}
	sort.SliceStable(byPath, func(i, j int) bool { return sortKey(byPath[i].m) < sortKey(byPath[j].m) })
	unions := unionsOf(fz, batch)
	for _, s := range byPath {
		if u := unions[fz.UnionKey(s.m)]; len(u) > 1 {
			if u[0].m != s.m {
				continue // computed with the first
			}
			g, err := unionPart(env, u, assume[s.m])
			if err != nil {
				return nil, nil, err
			}
			g = labels.Replace(g)
			parts, checkParts = append(parts, g), append(checkParts, g)
			if e == nil {
				e = g
			} else {
				e = cel.Bin("+", e, g)
			}
			continue
		}
		ops, ok := opsOf[s.m]
		around, err := replacedAround(fz, s, batch, guardOf)
		if err != nil {
			return nil, nil, err
		}
		if s.share != nil && guardOf[s.share.M] != nil {
			if ops, err = sharedCreationOps(env, s, guardOf[s.share.M], assume[s.m], rules); err != nil {
				return nil, nil, err
			}
		} else if !ok || assume[s.m] != 0 || len(around) > 0 {
			gen := s.m
			if s.gen != nil {
				gen = s.gen
			}
			if ops, err = lower.JSONPatchAround(gen, env.Features(), assume[s.m], around); err != nil {
				return nil, nil, err
			}
			ops = assumeRequest(s.m, ops, rules)
		}
		ops = labels.Replace(ops)
		g := cel.Guarded(s.guard, ops)
		if !cel.IsEmpty(g) {
			parts = append(parts, g)
			// A guard is a policy variable of type bool (compileFused checks it), so g has the
			// type of ops: checked without the guard, ops of one shape are checked once for every
			// step with another match.
			c := g
			if _, isVar := cel.AsVarRef(s.guard); isVar {
				c = ops
			}
			checkParts = append(checkParts, c)
		}
		if e == nil {
			e = g
		} else {
			e = cel.Bin("+", e, g)
		}
	}
	// Parts looping over the same list share one comprehension (each still guarded as before),
	// and parts under one condition test it once (cel.Compact). The parts returned for checking
	// are those before compaction, which keep their shapes from batch to batch (see
	// cel.Shape); compaction only regroups lists of operations and writes an operation as an
	// optional element or a member of an added object, which keeps every part's type.
	// cel.SelfCheck (on in tests) checks the compacted expression whole as well.
	checked := checkParts
	parts = cel.MergeLoops(parts, env.Features())
	if len(parts) == 0 {
		return e, checked, nil
	}
	compacted := cel.CompactTerms(parts)
	if len(compacted) == 0 {
		compacted = parts // nothing but empty lists: keep the parts, which the API server accepts
	}
	e = compacted[0]
	for _, p := range compacted[1:] {
		e = cel.Bin("+", e, p)
	}
	return e, checked, nil
}

// unionSize bounds the length a merge's values add to a union (lower.MergeUnion) of merges into its
// list: each value, under its condition.
func unionSize(s step, vals []any, labels *cel.Named) int {
	l, err := cel.LabelsMatch(s.m.Match.LabelSelector)
	if err != nil {
		return math.MaxInt / 2 // not to be joined: the merge's own error comes later
	}
	when := cel.And(s.guard, labels.Replace(l))
	each := len("dyn(), ")
	if when != cel.True {
		each += cel.Len(when) + len("?( && !()) ? optional.of() : optional.none()")
	}
	n := 0
	for _, v := range vals {
		e, err := cel.Value(v)
		if err != nil {
			return math.MaxInt / 2
		}
		n += cel.Len(e) + each
	}
	return n
}

// unites: is a step of batch a merge computed with s in one union (plan.UnionKey)?
func unites(fz *plan.Fuser, s step, batch []step) bool {
	k := fz.UnionKey(s.m)
	for _, t := range batch {
		if t.m != s.m && k != "" && fz.UnionKey(t.m) == k {
			return true
		}
	}
	return false
}

// unionsOf is the steps of batch that are merges into one list (plan.UnionKey), by key, in the
// batch's order (Gatekeeper's: the fuser lets them share an expression only in their order).
func unionsOf(fz *plan.Fuser, batch []step) map[string][]step {
	out := map[string][]step{}
	for _, s := range batch {
		if k := fz.UnionKey(s.m); k != "" {
			out[k] = append(out[k], s)
		}
	}
	return out
}

// unionPart is the operations of the merges (or the prunes) u of one list, computed together
// (lower.MergeUnion, lower.PruneUnion), each where its guard and label selector hold.
func unionPart(env *cel.Env, u []step, assume int) (cel.Expr, error) {
	parts := make([]lower.MergePart, len(u))
	prunes := false
	for i, s := range u {
		labels, err := cel.LabelsMatch(s.m.Match.LabelSelector)
		if err != nil {
			return nil, err
		}
		_, isPrune := s.m.Op.(ir.PruneSet)
		prunes = prunes || isPrune
		parts[i] = lower.MergePart{Values: setValues(s.m), When: cel.And(s.guard, labels)}
	}
	if prunes {
		return lower.PruneUnion(u[0].m, parts, env.Features(), assume)
	}
	return lower.MergeUnion(u[0].m, parts, env.Features(), assume)
}

// replacedAround is the elements that other steps of the batch replace whole, which s's
// operations must leave out (plan.Fuser.PrunedAround): each where the other step applies (its
// guard and label selector) and replaces an element that exists (no test on its path says
// otherwise; a step computed only where it creates its element replaces none).
func replacedAround(fz *plan.Fuser, s step, batch []step, guardOf map[*ir.Mutation]cel.Expr) ([]lower.Replaced, error) {
	var out []lower.Replaced
	for _, t := range replacers(fz, s, batch) {
		gen := t.m
		if t.gen != nil {
			gen = t.gen
		}
		labels, err := cel.LabelsMatch(t.m.Match.LabelSelector)
		if err != nil {
			return nil, err
		}
		last := gen.Path[len(gen.Path)-1]
		out = append(out, lower.Replaced{Depth: len(gen.Path) - 1, KeyField: last.KeyField, KeyValue: last.KeyValue, When: cel.And(guardOf[t.m], labels)})
	}
	return out, nil
}

// replacers is the steps of batch that replace elements s's operations must leave out
// (replacedAround).
func replacers(fz *plan.Fuser, s step, batch []step) []step {
	var out []step
	for _, t := range batch {
		if t.m == s.m || !fz.PrunedAround(t.m, s.m) {
			continue
		}
		gen := t.m
		if t.gen != nil {
			gen = t.gen
		}
		replaces := true
		for i := range gen.Path {
			replaces = replaces && gen.ExistsOK[i]
		}
		if replaces {
			out = append(out, t)
		}
	}
	return out
}

// leavesOut explains, for the steps of batch that leave out elements others replace, which.
func leavesOut(fz *plan.Fuser, batch []step) []string {
	var out []string
	for _, s := range batch {
		for _, t := range replacers(fz, s, batch) {
			out = append(out, fmt.Sprintf("%s leaves out the element %s that %s replaces where its match holds (it removes nothing from what %s assigns there, so either order gives that element)",
				s.m.Source, ir.PathString(t.m.Path), t.m.Source, t.m.Source))
		}
	}
	return out
}

// unionMatch is the request-level match of a policy holding ms: the union of their rules (every
// kind if one of them has none), and the namespace selector only when all share it.
func unionMatch(ms []*ir.Mutation) ir.Match {
	var u ir.Match
	all := false
	for _, m := range ms {
		if len(m.Match.Rules) == 0 {
			all = true
			u.Operations = mergeOps(u.Operations, m.Match.Operations)
		}
	}
	if all {
		for _, m := range ms {
			for _, r := range m.Match.Rules {
				u.Operations = mergeOps(u.Operations, r.Operations)
			}
		}
	} else {
		seen := map[string]bool{}
		for _, m := range ms {
			for _, r := range m.Match.Rules {
				k := fmt.Sprintf("%s/%s/%s/%v", r.Group, r.Version, r.Kind, r.Operations)
				if !seen[k] {
					seen[k] = true
					u.Rules = append(u.Rules, r)
				}
			}
		}
		sort.Slice(u.Rules, func(i, j int) bool {
			a, b := u.Rules[i], u.Rules[j]
			return fmt.Sprintf("%s/%s/%s/%v", a.Group, a.Version, a.Kind, a.Operations) < fmt.Sprintf("%s/%s/%s/%v", b.Group, b.Version, b.Kind, b.Operations)
		})
	}
	return u
}

func rulesKey(m ir.Match) string {
	if len(m.Rules) == 0 {
		return "*"
	}
	var parts []string
	for _, r := range m.Rules {
		parts = append(parts, fmt.Sprintf("%s/%s/%s", r.Group, r.Version, r.Kind))
	}
	sort.Strings(parts)
	return strings.Join(dedupe(parts), ",")
}

func dedupe(s []string) []string {
	var out []string
	for i, x := range s {
		if i == 0 || x != s[i-1] {
			out = append(out, x)
		}
	}
	return out
}

// fusedName names a fused policy after the resources it applies to: gatekeeper-pods,
// gatekeeper-apps-deployments, gatekeeper-all-resources; several resources are joined, and a
// long name is cut and suffixed with a hash of the whole.
func fusedName(m ir.Match, resources *emit.Resources) string {
	if len(m.Rules) == 0 {
		return namePrefix + "all-resources"
	}
	var parts []string
	for _, r := range m.Rules {
		res, ok := resources.Resource(schema.GroupVersionKind{Group: r.Group, Version: r.Version, Kind: r.Kind})
		if !ok {
			res = strings.ToLower(r.Kind)
		}
		name := res
		if r.Group != "" {
			name = strings.ReplaceAll(r.Group, ".", "-") + "-" + res
		}
		if r.Version != "v1" {
			name += "-" + r.Version
		}
		parts = append(parts, name)
	}
	sort.Strings(parts)
	name := namePrefix + strings.Join(dedupe(parts), "-")
	if len(name) > 100 {
		sum := sha256.Sum256([]byte(name))
		name = name[:90] + "-" + hex.EncodeToString(sum[:])[:8]
	}
	return name
}

// guardVariables replaces, in guards, every guard other than true by a reference to a policy
// variable holding it (one per distinct guard, named after the first mutator, in order), and
// returns the variables: first the parts the guards share (cel.ShareParts: match_part_1, ...,
// or the name of the guard a part is the whole of), then the other guards.
func guardVariables(pr printer, members []*ir.Mutation, guards map[*ir.Mutation]cel.Expr) (parts, vars []cel.Variable, _ *mutationError) {
	count := map[string]int{}
	var distinct []cel.Expr
	var firstOf []*ir.Mutation
	index := map[string]int{}
	for _, m := range members {
		if g, ok := guards[m]; ok && g != cel.True {
			text := cel.String(g)
			if _, ok := index[text]; !ok {
				index[text] = len(distinct)
				distinct = append(distinct, g)
				firstOf = append(firstOf, m)
			}
			count[text]++
		}
	}
	// A guard of one mutator is named after it; one several share, by number.
	names := make([]string, len(distinct))
	used := map[string]bool{}
	nshared := 0
	for i, g := range distinct {
		base := variableName(firstOf[i].Source)
		if count[cel.String(g)] > 1 {
			nshared++
			base = fmt.Sprintf("shared_match_%d", nshared)
		}
		name := base
		for k := 2; used[name]; k++ {
			name = fmt.Sprintf("%s_%d", base, k)
		}
		used[name] = true
		names[i] = name
	}
	shared, named := cel.ShareParts(distinct, "match_part", names)
	for _, p := range named {
		printed, err := pr.env.Print(p.Expr)
		if err != nil {
			return nil, nil, &mutationError{members[0], err}
		}
		parts = append(parts, cel.Variable{Name: p.Name, Expression: printed})
	}
	for i, g := range shared {
		if _, ok := cel.AsVarRef(g); ok {
			continue // the guard is a part others share, under its name
		}
		printed, err := pr.env.Print(g)
		if err != nil {
			return nil, nil, &mutationError{firstOf[i], err}
		}
		vars = append(vars, cel.Variable{Name: names[i], Expression: printed})
	}
	for _, m := range members {
		if g, ok := guards[m]; ok && g != cel.True {
			guards[m] = cel.VarRef(names[index[cel.String(g)]])
		}
	}
	return parts, vars, nil
}

// labelVariables names the label selector tests of members and of the mutators they complete
// (cel.Named): labels_1, labels_2, ... in the members' order. (A guard variable is named after a
// mutator kind, which no label variable's name begins with.) A selector that fails to convert is
// left out: lowering the mutation reports it.
func labelVariables(members []*ir.Mutation) *cel.Named {
	n := cel.NewNamed(nil)
	add := func(m *ir.Mutation) {
		if e, err := cel.LabelsMatch(m.Match.LabelSelector); err == nil {
			// The test reads only the object's labels, which Named accepts.
			_, _ = n.Add(fmt.Sprintf("labels_%d", n.Len()+1), e)
		}
	}
	for _, m := range members {
		add(m)
		for _, c := range m.Completions {
			add(c.By)
		}
	}
	return n
}

// printVariables prints named expressions as policy variables.
func printVariables(pr printer, ns []cel.NamedExpr) ([]cel.Variable, error) {
	out := make([]cel.Variable, len(ns))
	for i, v := range ns {
		printed, err := pr.env.Print(v.Expr)
		if err != nil {
			return nil, err
		}
		out[i] = cel.Variable{Name: v.Name, Expression: printed}
	}
	return out, nil
}

// variableName is a CEL identifier for a mutator's match: kind_name, lower case, other
// characters as underscores.
func variableName(src ir.Source) string {
	var b strings.Builder
	for _, r := range strings.ToLower(src.Kind + "_" + src.Name) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

// minKeyLookups is the number of lookups by key of one list in one expression from which the
// list's keys become a policy variable (cel.KeyLists).
const minKeyLookups = 2
