package lower

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/mapc-dev/mapc/cel"
)

// Kyverno's images variable (pkg/engine/context AddImageInfos, pkg/utils/api
// ExtractImagesFromResource, pkg/utils/image GetImageInfo) maps each container list of a Pod, or
// of the Pod template of a Deployment, DaemonSet, StatefulSet, ReplicaSet, ReplicationController,
// Job or CronJob (chosen by the object's kind), to the containers with an image that is not
// blank, by name (the last of a name wins), each to what distribution/reference's grammar makes
// of the image: {registry, name, path, tag, digest, reference, referenceWithTag, jsonPointer},
// the empty ones left out. Kyverno builds it once per admission request, from the object as the
// request brings it; one image that does not parse fails every images variable, while a name, a
// list or a kind without images is a missing field (which || reads as null).
//
// A MutatingAdmissionPolicy has no such variable: the lowering parses the images of the object
// the mutation sees, with the grammar's own regular expressions (RE2 in CEL as in Go), in a
// policy variable. That is the request's object only where nothing before the mutation changes
// the images; the backend refuses the reads where something can (imagesBefore, imagesAcross).

// imageLists are the container lists Kyverno's standard extractors read, in their order.
var imageLists = []string{"initContainers", "containers", "ephemeralContainers"}

// imageFields are the fields of an image's entry; all strings.
var imageFields = []string{"registry", "name", "path", "tag", "digest", "reference", "referenceWithTag", "jsonPointer"}

// distribution/reference v0.6.0's grammar (regexp.go), as Kyverno v1.19.1 parses images with it.
const (
	refAlphanumeric  = `[a-z0-9]+`
	refSeparator     = `(?:[._]|__|[-]+)`
	refDomainComp    = `(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])`
	refDomainName    = refDomainComp + `(?:\.` + refDomainComp + `)*`
	refHost          = `(?:` + refDomainName + `|\[(?:[a-fA-F0-9:]+)\])`
	refDomainAndPort = refHost + `(?::[0-9]+)?`
	refTag           = `[\w][\w.-]{0,127}`
	refDigest        = `[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*[:][[:xdigit:]]{32,}`
	refPathComp      = refAlphanumeric + `(?:` + refSeparator + refAlphanumeric + `)*`
	refRemoteName    = refPathComp + `(?:/` + refPathComp + `)*`
	refName          = `(?:` + refDomainAndPort + `/)?` + refRemoteName
	// refReference is ReferenceRegexp: name, then :tag, then @digest.
	refReference = `^(` + refName + `)(?::(` + refTag + `))?(?:@(` + refDigest + `))?$`
	// refDigestValid is what go-digest v1.0.0's Parse accepts of a digest the grammar matched:
	// an algorithm it has (sha256, sha384, sha512) with its length of lower-case hex.
	refDigestValid = `^(?:sha256:[a-f0-9]{64}|sha384:[a-f0-9]{96}|sha512:[a-f0-9]{128})$`
	// refMaxPath is RepositoryNameTotalLengthMax, checked on the path (the name without domain).
	refMaxPath = 255
)

// Kyverno's default configuration: the registry it adds to an image without one, and whether it
// keeps it in the registry it reports.
const defaultRegistry = "docker.io"

// podSpecKinds are the kinds whose Pod template Kyverno's standard extractors read, by path.
var podSpecKinds = []struct {
	kinds []string
	path  []string
}{
	{[]string{"Pod"}, []string{"spec"}},
	{[]string{"DaemonSet", "Deployment", "ReplicaSet", "ReplicationController", "StatefulSet", "Job"}, []string{"spec", "template", "spec"}},
	{[]string{"CronJob"}, []string{"spec", "jobTemplate", "spec", "template", "spec"}},
}

// ImagesVariable is the policy variable (spec.variables) the lowered reads of images read:
// {list: [{"name": ..., "info": entry}, ...]} for the containers with an image that is not
// blank (no containers for other kinds), failing where an image does not parse, as Kyverno's
// loading of images does. The API server evaluates a variable when an expression first reads it,
// as Kyverno loads images when a variable first names them.
const ImagesVariable = "images"

// Images is the expression of ImagesVariable.
func Images() cel.Expr {
	c := &lowering{}
	kind := cel.Field(object, "kind")
	isKind := func(kinds []string) cel.Expr {
		ks := make([]cel.Expr, len(kinds))
		for j, k := range kinds {
			ks[j] = cel.Str(k)
		}
		if len(ks) == 1 {
			return cel.Bin("==", kind, ks[0])
		}
		return cel.Bin("in", kind, cel.List(ks...))
	}
	// The Pod spec, an optional: none for other kinds (Kyverno then has no images).
	spec := cel.Expr(cel.Call("optional.none"))
	for i := len(podSpecKinds) - 1; i >= 0; i-- {
		var at cel.Expr = dyn(object)
		for _, f := range podSpecKinds[i].path {
			at = cel.OptIndex(at, cel.Str(f))
		}
		spec = cel.Cond(isKind(podSpecKinds[i].kinds), at, spec)
	}
	specName, listsName, idx, ct, k, en := c.name(), c.name(), c.fresh(), c.fresh(), c.fresh(), c.fresh()
	imageOf := cel.Method(cel.OptIndex(ct, cel.Str("image")), "orValue", cel.Str(""))
	keys, vals := []cel.Expr{}, []cel.Expr{}
	for _, l := range imageLists {
		var ptr cel.Expr = cel.Str("")
		for i := len(podSpecKinds) - 1; i >= 0; i-- {
			pk := podSpecKinds[i]
			prefix := cel.Str("/" + strings.Join(pk.path, "/") + "/" + l + "/")
			ptr = cel.Cond(isKind(pk.kinds), cel.Bin("+", cel.Bin("+", prefix, cel.Call("string", idx)), cel.Str("/image")), ptr)
		}
		items := cel.Method(cel.OptIndex(dyn(cel.Method(cel.Ident(specName), "orValue", cel.Map(nil, nil))), cel.Str(l)), "orValue", cel.List())
		// Kyverno skips a blank image (strings.TrimSpace; CEL's trim cuts the same Unicode
		// white space).
		keys = append(keys, cel.Str(l))
		vals = append(vals, cel.Method(items, "transformList", idx, ct, cel.Bin("!=", cel.Method(imageOf, "trim"), cel.Str("")),
			cel.Map([]cel.Expr{cel.Str("name"), cel.Str("info")}, []cel.Expr{dyn(cel.Index(ct, cel.Str("name"))), c.imageInfo(imageOf, ptr)})))
	}
	lists := cel.Ident(listsName)
	// Every image of every list parses, or every images variable fails.
	valid := cel.Method(lists, "all", k, cel.Method(cel.Index(lists, k), "all", en, cel.Bin("!=", cel.Index(en, cel.Str("info")), cel.Null())))
	return cel.Let(specName, spec,
		cel.Let(listsName, cel.Map(keys, vals),
			cel.Cond(valid, dyn(lists), fail("an image does not parse: Kyverno fails every images variable"))))
}

// images is images.<list>.<name>: the entry of the last container of the list named name (a CEL
// string) whose image is not blank, failing where Kyverno's images variable has none or fails.
func (c *lowering) images(list string, name cel.Expr) (value, error) {
	if err := needs(c, "images", cel.Features{TwoVar: true}); err != nil {
		return value{}, err
	}
	if err := c.defaultRegistry("images"); err != nil {
		return value{}, err
	}
	en, m := c.fresh(), c.name()
	_, literal := cel.StrValue(name)
	// The name is evaluated first: where it fails (a spliced name that does not parse), the
	// variable fails, containers or none.
	lookup := func(none cel.Expr) cel.Expr {
		return c.bind(name, literal, func(name cel.Expr) cel.Expr {
			matched := cel.Method(cel.Index(cel.VarRef(ImagesVariable), cel.Str(list)), "filter", en, cel.Bin("==", cel.Index(en, cel.Str("name")), dyn(name)))
			return cel.Let(m, matched, cel.Cond(cel.Bin("==", cel.Call("size", cel.Ident(m)), cel.Int(0)), none,
				dyn(cel.Index(cel.Index(cel.Ident(m), cel.Bin("-", cel.Call("size", cel.Ident(m)), cel.Int(1))), cel.Str("info")))))
		})
	}
	// No such container (or list, or images at all, for another kind or without images) is a
	// missing field to Kyverno's JMESPath, which || and the like read as null; an image that
	// does not parse fails the variable itself.
	v := found(lookup(fail(fmt.Sprintf("images.%s has no container of that name with an image", list))), tMap, false)
	v.missing, v.soft, v.st = true, lookup(cel.Null()), tMap|tNull
	v.imageInfo = true
	return v, nil
}

// name is a new identifier's name.
func (c *lowering) name() string {
	c.n++
	return fmt.Sprintf("jp%d", c.n)
}

// imageInfo is Kyverno's entry for the image img (a CEL string) at the JSON pointer ptr, or null
// where distribution/reference does not parse it (GetImageInfo, with Kyverno's default
// configuration).
func (c *lowering) imageInfo(img, ptr cel.Expr) cel.Expr {
	id := func(s string) cel.Expr { return cel.Ident(s) }
	str := cel.Str
	plus := func(xs ...cel.Expr) cel.Expr {
		out := xs[0]
		for _, x := range xs[1:] {
			out = cel.Bin("+", out, x)
		}
		return out
	}
	sub := func(s cel.Expr, args ...cel.Expr) cel.Expr { return cel.Method(s, "substring", args...) }
	idx := func(s cel.Expr, of string) cel.Expr { return cel.Method(s, "indexOf", str(of)) }
	nonEmpty := func(x cel.Expr) cel.Expr { return cel.Bin("!=", x, str("")) }
	optIf := func(x cel.Expr) cel.Expr {
		return cel.Cond(nonEmpty(x), cel.Call("optional.of", dyn(x)), cel.Call("optional.none"))
	}
	n := func() string { return c.name() }
	imgN, first0, full, at, digest, rest, slash, tail, colon, tag, nm, first, reg, path, tagD, u :=
		n(), n(), n(), n(), n(), n(), n(), n(), n(), n(), n(), n(), n(), n(), n(), n()
	im := id(imgN)
	// addDefaultRegistry: an image whose first part is not a registry (no ".", ":", not
	// localhost, all lower case) is read as docker.io's.
	f0 := id(first0)
	notRegistry := cel.And(cel.Not(cel.Method(f0, "contains", str("."))), cel.Not(cel.Method(f0, "contains", str(":"))),
		cel.Bin("!=", f0, str("localhost")), cel.Bin("==", cel.Method(f0, "lowerAscii"), f0))
	fullE := cel.Cond(cel.Bin("<", idx(im, "/"), cel.Int(0)), plus(str(defaultRegistry+"/"), im),
		cel.Let(first0, sub(im, cel.Int(0), idx(im, "/")), cel.Cond(notRegistry, plus(str(defaultRegistry+"/"), im), im)))
	fu := id(full)
	// The parts of a reference the grammar matched: @ only before the digest, : after the last
	// / only before the tag, a / always (docker.io/ added, or a registry's).
	domain := cel.Method(id(first), "matches", str("^"+refDomainAndPort+"$"))
	regV, pathV, tagV, dgV := id(reg), id(path), id(tagD), id(digest)
	withReg := func(x cel.Expr) cel.Expr { return cel.Cond(nonEmpty(regV), plus(regV, str("/"), x), x) }
	// Kyverno's registry rule: no registry and a first path part with _ in it make that part
	// the registry (after the references are made).
	us := id(u)
	underscore := cel.And(cel.Bin("==", regV, str("")), cel.Bin(">=", idx(pathV, "/"), cel.Int(0)),
		cel.Method(sub(pathV, cel.Int(0), idx(pathV, "/")), "contains", str("_")))
	info := cel.OptMap(
		[]cel.Expr{str("registry"), str("name"), str("path"), str("tag"), str("digest"), str("reference"), str("referenceWithTag"), str("jsonPointer")},
		[]cel.Expr{
			optIf(cel.Cond(us, sub(pathV, cel.Int(0), idx(pathV, "/")), regV)),
			dyn(sub(pathV, cel.Bin("+", cel.Method(pathV, "lastIndexOf", str("/")), cel.Int(1)))),
			dyn(cel.Cond(us, sub(pathV, cel.Bin("+", idx(pathV, "/"), cel.Int(1))), pathV)),
			optIf(tagV),
			optIf(dgV),
			dyn(plus(withReg(pathV), cel.Cond(nonEmpty(dgV), plus(str("@"), dgV), plus(str(":"), tagV)))),
			dyn(plus(withReg(pathV), str(":"), tagV)),
			dyn(ptr),
		},
		[]bool{true, false, false, true, true, false, false, false})
	parsed := cel.Let(at, idx(fu, "@"),
		cel.Let(digest, cel.Cond(cel.Bin(">=", id(at), cel.Int(0)), sub(fu, cel.Bin("+", id(at), cel.Int(1))), str("")),
			cel.Let(rest, cel.Cond(cel.Bin(">=", id(at), cel.Int(0)), sub(fu, cel.Int(0), id(at)), fu),
				cel.Let(slash, cel.Method(id(rest), "lastIndexOf", str("/")),
					cel.Let(tail, sub(id(rest), cel.Bin("+", id(slash), cel.Int(1))),
						cel.Let(colon, idx(id(tail), ":"),
							cel.Let(tag, cel.Cond(cel.Bin(">=", id(colon), cel.Int(0)), sub(id(tail), cel.Bin("+", id(colon), cel.Int(1))), str("")),
								cel.Let(nm, cel.Cond(cel.Bin(">=", id(colon), cel.Int(0)), sub(id(rest), cel.Int(0), cel.Bin("+", cel.Bin("+", id(slash), cel.Int(1)), id(colon))), id(rest)),
									cel.Let(first, sub(id(nm), cel.Int(0), idx(id(nm), "/")),
										cel.Let(reg, cel.Cond(domain, id(first), str("")),
											cel.Let(path, cel.Cond(domain, sub(id(nm), cel.Bin("+", cel.Call("size", id(first)), cel.Int(1))), id(nm)),
												cel.Cond(cel.Or(cel.Bin(">", cel.Call("size", pathV), cel.Int(refMaxPath)),
													cel.And(nonEmpty(dgV), cel.Not(cel.Method(dgV, "matches", str(refDigestValid))))),
													cel.Null(),
													// Tag latest where there is neither tag nor digest.
													dyn(cel.Let(tagD, cel.Cond(cel.And(cel.Bin("==", id(tag), str("")), cel.Bin("==", dgV, str(""))), str("latest"), id(tag)),
														cel.Let(u, underscore, info)))))))))))))))
	return cel.Let(imgN, img,
		cel.Let(full, fullE,
			cel.Cond(cel.Method(fu, "matches", str(refReference)), dyn(parsed), cel.Null())))
}

// imageField is a field of an image's entry: a string, missing where empty (registry, tag,
// digest).
func (c *lowering) imageField(cur value, name string) (value, error) {
	if !slices.Contains(imageFields, name) {
		return value{}, c.refuse("an image's entry in Kyverno's images has only %s: it finds no %s and fails the rule", strings.Join(imageFields, ", "), name)
	}
	out := c.step(cur, name)
	out.t, out.st, out.ascii, out.tame = tStr, tStr|tNull, true, tameWord // the grammar's characters
	switch name {
	case "registry", "tag", "digest":
	default:
		if !cur.missing { // always there
			out.missing, out.soft, out.st, out.opt = false, out.e, tStr, nil
		}
	}
	return out, nil
}

// fieldName is the CEL string of the field name of a path step: name itself, or the value of a
// variable written inside the variable's text, where key (a container's name after
// images.<list>) allows one. Kyverno splices the inner value into the text before it parses it:
// inside quotes ("{{element.name}}") the value names the field unless it holds a quote, a
// backslash, a control character or a brace (Kyverno looks for variables in the text again);
// bare (.{{element.name}}.) only a value that is a JMESPath identifier does (a name with "-" or
// a leading digit does not parse). Everywhere else the lowering fails, as Kyverno does for every
// container name the API server accepts (a DNS label).
func (c *lowering) fieldName(name string, key bool) (cel.Expr, error) {
	if name == "" || (name[0] != 0 && name[0] != 1) {
		return cel.Str(name), nil
	}
	k, err := strconv.Atoi(name[1:])
	if err != nil || k >= len(c.inner) {
		return cel.Str(name), nil
	}
	if !key {
		return nil, c.refuse("a variable written inside another one's text is supported only as the container name of images.<list>.<name>: Kyverno splices its value into the text before parsing it")
	}
	iv := c.inner[k]
	if iv.virt != real || iv.t != tStr || iv.lossy {
		return nil, c.refuse("the variable written inside it must be a string (as element.name is): Kyverno splices its value into the text before parsing it")
	}
	pattern := `^[^"\\\x00-\x1f{}]*$`
	if name[0] == 1 {
		pattern = `^[A-Za-z_][A-Za-z0-9_]*$`
	}
	return c.bind(iv.e, iv.simple, func(x cel.Expr) cel.Expr {
		return cel.Cond(cel.Method(x, "matches", cel.Str(pattern)), x, fail("the name spliced into the variable does not parse as Kyverno's JMESPath"))
	}), nil
}

// splicedText reads a string literal that is the k-th inner variable's text ('\x02k', see
// splices; ok false for any other literal). Kyverno splices the value into the raw string
// literal of the outer variable's JMESPath ('{{element.image}}'), which then reads as the value
// where it holds no ' and does not end with \ (the raw literal's only escape is \'), and where
// it holds no brace (Kyverno looks for variables again in the text the splice makes). The inner
// variable must be a string whose characters the API server keeps to printable ASCII without
// quotes, backslashes and braces (tameValid: an image, a name, a label's value); the policy
// fails on one that is not, as Kyverno's JMESPath then mostly fails to parse (a value crafted
// to parse as other JMESPath, or with a quote or a letter outside ASCII, which no such value
// holds in an object the API server stores or a Pod that runs, is not reproduced).
func (c *lowering) splicedText(lit any) (v value, ok bool, err error) {
	s, isStr := lit.(string)
	if !isStr || len(s) < 2 || s[0] != 2 {
		return value{}, false, nil
	}
	k, err := strconv.Atoi(s[1:])
	if err != nil || k >= len(c.inner) {
		return value{}, false, nil
	}
	iv := c.inner[k]
	if iv.virt != real || iv.t != tStr || iv.lossy || iv.tame&tameValid == 0 {
		return value{}, true, c.refuse("the variable written inside a raw string of its text must be a string whose characters the API server keeps to printable ASCII without quotes and backslashes (an image, a name, a label's value): Kyverno splices its text into the raw string before parsing it")
	}
	e := c.bind(iv.e, iv.simple, func(x cel.Expr) cel.Expr {
		return cel.Cond(cel.Method(dyn(x), "matches", cel.Str(`^[ -!#-&(-\[\]-z|~]*$`)), x, fail("a quote, a backslash, a brace or a character that is not printable ASCII spliced into the variable's raw string: Kyverno's JMESPath does not read it as the value"))
	})
	out := found(e, tStr, false)
	out.ascii, out.tame = true, tameYes // checked
	return out, true, nil
}

// defaultRegistry refuses what reads Kyverno's registry settings where its configuration
// changes them.
func (c *lowering) defaultRegistry(what string) error {
	if len(c.sc.Registry) == 0 {
		return nil
	}
	return c.refuse("%s is translated for Kyverno's default registry settings only (defaultRegistry docker.io, enableDefaultRegistryMutation true), and its configuration sets %s", what, strings.Join(c.sc.Registry, ", "))
}

// imageNormalize is image_normalize: Kyverno's GetImageInfo of a string, written back whole
// (ImageInfo.String, which is its reference); an image that does not parse fails the rule.
func imageNormalize(c *lowering, name string, args []value) (value, error) {
	if err := c.defaultRegistry(name); err != nil {
		return value{}, err
	}
	e := c.bindAll(args, func(a []value) cel.Expr {
		info := c.name()
		return cel.Call("string", stringsOnly(name, cel.Let(info, c.imageInfo(dyn(a[0].e), cel.Str("")),
			cel.Cond(cel.Bin("==", cel.Ident(info), cel.Null()), fail(name+": the image does not parse: Kyverno fails the rule"),
				cel.Index(cel.Ident(info), cel.Str("reference")))), a...))
	})
	v := found(e, tStr, false)
	v.ascii, v.tame = true, tameWord // an image's reference
	return v, nil
}
