// Package diag is what a compilation tells its user besides the policies: problems (refusals
// and rejections, each positioned at a file, line, object and field) and notes (documents
// ignored, input policies left out or computed differently, and why), each note of a kind that
// the command line and reports select by, never by its text. It sorts problems and prints both
// in one format.
//
// It knows no input language: front ends and their back ends fill in the fields; it must not
// import anything under compiler/ but compiler/source.
package diag

import (
	"errors"
	"fmt"
	"sort"

	"github.com/mapc-dev/mapc/compiler/source"
)

// Severity says whether a problem fails the compilation.
type Severity int

const (
	// Error: the object cannot be compiled exactly; the run fails.
	Error Severity = iota
	// Warning: listed, not a failure (a refusal an allow-list expects).
	Warning
)

// Problem is a refusal or rejection of one input object, positioned. As an error it prints as
// "file:line: Kind/name: field: message"; in reports it is that object (JSON).
type Problem struct {
	File   string `json:"file,omitempty"`
	Line   int    `json:"line,omitempty"`
	Object string `json:"object,omitempty"` // Kind/name
	Field  string `json:"field,omitempty"`
	Msg    string `json:"message"`
	// Severity is Error unless an allow-list expects the problem.
	Severity Severity `json:"-"`
}

func (p *Problem) Error() string {
	s := fmt.Sprintf("%s:%d: %s: ", p.File, p.Line, p.Object)
	if p.Field != "" {
		s += p.Field + ": "
	}
	return s + p.Msg
}

// Reason is the problem as a reason of its object: "field: message".
func (p *Problem) Reason() string {
	if p.Field != "" {
		return p.Field + ": " + p.Msg
	}
	return p.Msg
}

// Problems gives every error of a compilation as a Problem, in order: a Problem as it is, a
// source.Error with its position, any other error as its message.
func Problems(errs []error) []Problem {
	out := make([]Problem, 0, len(errs))
	for _, e := range errs {
		var p *Problem
		var se *source.Error
		switch {
		case errors.As(e, &p):
			out = append(out, *p)
		case errors.As(e, &se):
			out = append(out, Problem{File: se.File, Line: se.Line, Msg: se.Msg})
		default:
			out = append(out, Problem{Msg: e.Error()})
		}
	}
	return out
}

// Sort orders problems by file, then line (for Problems), then text, stably.
func Sort(errs []error) {
	sort.SliceStable(errs, func(i, j int) bool { return less(errs[i], errs[j]) })
}

func less(a, b error) bool {
	pa, oka := a.(*Problem)
	pb, okb := b.(*Problem)
	if oka && okb {
		if pa.File != pb.File {
			return pa.File < pb.File
		}
		if pa.Line != pb.Line {
			return pa.Line < pb.Line
		}
	}
	return a.Error() < b.Error()
}

// NoteKind says what a note is about.
type NoteKind int

const (
	// Ignored: a document no front end reads (not an input policy of any language mapc knows).
	Ignored NoteKind = iota
	// Installation: what the installation being replaced adds to every policy (the namespaces
	// a Gatekeeper Config excludes from mutation).
	Installation
	// NeverApplies: the input policy never applies to an admission request; no policy.
	NeverApplies
	// OutsideSchema: none of the input policy's kinds has the field it writes, so the API server
	// would drop the write; no policy.
	OutsideSchema
	// NotAppliedTo: some of the input policy's kinds lack the field it writes; it is not applied
	// to them.
	NotAppliedTo
	// NeverWrites: the input policy can never write anything; no policy.
	NeverWrites
	// Redundant: the input policy never changes an object in its engine's run; no mutation.
	Redundant
	// Forwarded: computed with the value a later input policy always replaces its write with.
	Forwarded
	// CreateOnly: computed only where it creates its list element.
	CreateOnly
)

// LeftOut: does a note of this kind say that its input policy got no mutation? (Shown without
// --verbose, and the reason a report gives.)
func (k NoteKind) LeftOut() bool {
	switch k {
	case NeverApplies, OutsideSchema, NeverWrites, Redundant:
		return true
	}
	return false
}

// NoPolicy: does a note of this kind say that its input policy got no policy at all?
func (k NoteKind) NoPolicy() bool {
	switch k {
	case NeverApplies, OutsideSchema, NeverWrites:
		return true
	}
	return false
}

// Note is information about one document: "file:line: Kind/name: message" (without the object
// when Object is empty).
type Note struct {
	Kind   NoteKind
	File   string
	Line   int
	Object string // Kind/name; empty for a note about a document that is no input policy
	Msg    string
}

// String is the note as printed.
func (n Note) String() string {
	if n.Object == "" {
		return fmt.Sprintf("%s:%d: %s", n.File, n.Line, n.Msg)
	}
	return fmt.Sprintf("%s:%d: %s: %s", n.File, n.Line, n.Object, n.Msg)
}

// About: is the note about object (Kind/name) in the document at file and line?
func (n Note) About(file string, line int, object string) bool {
	return n.Object != "" && n.File == file && n.Line == line && n.Object == object
}
