// Package lower turns Gatekeeper's mutations (package ir) and match clauses into
// CEL syntax trees (package cel): JSONPatch expressions that walk the object exactly as
// Gatekeeper's engine walks a location (JSONPatch, PreCreate, MergeUnion), its image split
// (RewriteImage), its wildcards and match clauses (NamespacesMatch, NameMatch, ScopeMatch, ...),
// and the rewrites of guards under what a policy's rules already say (AssumeRequest,
// AssumeNotNamespace).
//
// It encodes Gatekeeper's semantics and nothing else: it builds trees only through package
// cel's constructors, prints and checks nothing itself, and must not import another front end.
package lower
