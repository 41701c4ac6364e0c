package verify

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"sort"
	"strings"
)

// Suite is a named group of results, the unit of the JSON and JUnit reports: one for `mapc
// verify`, one per suite file for `mapc test`.
type Suite struct {
	Name    string
	Results []Result
	// Skipped are cases that did not run, with the reason (e.g. a feature a foreign suite format
	// has and mapc does not support).
	Skipped []Skip
}

// Skip is a case that did not run.
type Skip struct {
	Case   string `json:"case"`
	Reason string `json:"reason"`
}

type jsonResult struct {
	Case    string         `json:"case"`
	File    string         `json:"file,omitempty"`
	Line    int            `json:"line,omitempty"`
	Pass    bool           `json:"pass"`
	Orders  int            `json:"orders,omitempty"`
	Order   []string       `json:"failingOrder,omitempty"`
	Reason  string         `json:"reason,omitempty"`
	Ignored []string       `json:"ignoredFailures,omitempty"`
	WantErr string         `json:"wantError,omitempty"`
	GotErr  string         `json:"gotError,omitempty"`
	Diff    string         `json:"diff,omitempty"`
	Want    map[string]any `json:"want,omitempty"`
	Got     map[string]any `json:"got,omitempty"`
}

type jsonSuite struct {
	Name    string       `json:"name"`
	Passed  int          `json:"passed"`
	Failed  int          `json:"failed"`
	Results []jsonResult `json:"results"`
	Skipped []Skip       `json:"skipped,omitempty"`
}

type jsonReport struct {
	Passed  int         `json:"passed"`
	Failed  int         `json:"failed"`
	Skipped int         `json:"skipped"`
	Suites  []jsonSuite `json:"suites"`
}

// WriteJSON writes the suites as one JSON document:
//
//	{"passed": N, "failed": M, "skipped": K, "suites": [{"name", "passed", "failed",
//	 "results": [{"case", "pass", "orders", "failingOrder", "reason", "ignoredFailures",
//	 "wantError", "gotError", "diff", "want", "got"}], "skipped": [{"case", "reason"}]}]}
//
// "want" is what was expected (for `mapc verify`, Gatekeeper's result) and "got" what the
// policies did; both objects are given for failures only. "ignoredFailures" lists the policies'
// expressions that failed and that failurePolicy Ignore skipped. Results are sorted by case.
func WriteJSON(w io.Writer, suites ...Suite) error {
	rep := jsonReport{Suites: []jsonSuite{}}
	for _, s := range suites {
		js := jsonSuite{Name: s.Name, Results: []jsonResult{}, Skipped: s.Skipped}
		for _, r := range sorted(s.Results) {
			jr := jsonResult{Case: r.Case, File: r.File, Line: r.Line, Pass: r.Pass, Orders: r.Orders, Ignored: r.Ignored}
			if r.Pass {
				js.Passed++
			} else {
				js.Failed++
				jr.Order, jr.Reason, jr.WantErr, jr.GotErr, jr.Diff = r.Order, r.Reason, r.WantErr, r.GotErr, r.Diff
				if r.Want != nil {
					jr.Want = r.Want.Object
				}
				if r.Got != nil {
					jr.Got = r.Got.Object
				}
			}
			js.Results = append(js.Results, jr)
		}
		rep.Passed += js.Passed
		rep.Failed += js.Failed
		rep.Skipped += len(s.Skipped)
		rep.Suites = append(rep.Suites, js)
	}
	data, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", data)
	return err
}

type junitFailure struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Text    string `xml:",cdata"`
}

type junitSkipped struct {
	Message string `xml:"message,attr"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Failure   *junitFailure `xml:"failure,omitempty"`
	Skipped   *junitSkipped `xml:"skipped,omitempty"`
}

type junitSuite struct {
	Name     string      `xml:"name,attr"`
	Tests    int         `xml:"tests,attr"`
	Failures int         `xml:"failures,attr"`
	Errors   int         `xml:"errors,attr"`
	Skipped  int         `xml:"skipped,attr"`
	Cases    []junitCase `xml:"testcase"`
}

type junitReport struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Errors   int          `xml:"errors,attr"`
	Skipped  int          `xml:"skipped,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

// WriteJUnit writes the suites as JUnit XML, the format CI systems read: one testsuite per Suite,
// one testcase per case (per object for `mapc verify`), a failure carrying the reason as its
// message and, as its text, the failing policy order, the errors and the diff.
func WriteJUnit(w io.Writer, name string, suites ...Suite) error {
	rep := junitReport{Name: name}
	for _, s := range suites {
		js := junitSuite{Name: s.Name}
		for _, r := range sorted(s.Results) {
			jc := junitCase{Name: r.Case, Classname: s.Name}
			if !r.Pass {
				jc.Failure = &junitFailure{Message: r.Reason, Type: "mismatch", Text: failureText(r)}
				js.Failures++
			}
			js.Cases = append(js.Cases, jc)
		}
		for _, sk := range s.Skipped {
			js.Cases = append(js.Cases, junitCase{Name: sk.Case, Classname: s.Name, Skipped: &junitSkipped{Message: sk.Reason}})
			js.Skipped++
		}
		js.Tests = len(js.Cases)
		rep.Tests += js.Tests
		rep.Failures += js.Failures
		rep.Skipped += js.Skipped
		rep.Suites = append(rep.Suites, js)
	}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(rep); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}

// failureText is the body of a failure: the failing order, both errors and the diff.
func failureText(r Result) string {
	var b strings.Builder
	if len(r.Order) > 0 {
		fmt.Fprintf(&b, "policy order: %s\n", strings.Join(r.Order, ", "))
	}
	if r.WantErr != "" {
		fmt.Fprintf(&b, "want error: %s\n", r.WantErr)
	}
	if r.GotErr != "" {
		fmt.Fprintf(&b, "got error: %s\n", r.GotErr)
	}
	b.WriteString(r.Diff)
	return b.String()
}

func sorted(rs []Result) []Result {
	out := append([]Result(nil), rs...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Case < out[j].Case })
	return out
}

// WriteGitHub writes the failures as GitHub Actions workflow commands, which the runner turns
// into annotations on the files and lines named, then the "N passed, M failed" line:
//
//	::error file=mutators/a.yaml,line=12,title=Pod/default/web::not mutated as Gatekeeper mutates it
func WriteGitHub(w io.Writer, suites ...Suite) error {
	passed, failed, skipped := 0, 0, 0
	for _, s := range suites {
		for _, r := range sorted(s.Results) {
			if r.Pass {
				passed++
				continue
			}
			failed++
			msg := r.Reason
			if t := failureText(r); t != "" {
				msg += "\n" + t
			}
			if _, err := fmt.Fprintf(w, "::error %s::%s\n", GitHubProperties(r.File, r.Line, r.Case), GitHubEscape(msg, false)); err != nil {
				return err
			}
		}
		skipped += len(s.Skipped)
	}
	summary := fmt.Sprintf("%d passed, %d failed", passed, failed)
	if skipped > 0 {
		summary += fmt.Sprintf(", %d skipped", skipped)
	}
	_, err := fmt.Fprintln(w, summary)
	return err
}

// GitHubProperties are a workflow command's properties: the file, line and title.
func GitHubProperties(file string, line int, title string) string {
	var p []string
	if file != "" {
		p = append(p, "file="+GitHubEscape(file, true))
		if line > 0 {
			p = append(p, fmt.Sprintf("line=%d", line))
		}
	}
	p = append(p, "title="+GitHubEscape(title, true))
	return strings.Join(p, ",")
}

// GitHubEscape escapes a workflow command's message or property value as the Actions runner
// unescapes it: %, CR and LF everywhere, and ':' and ',' in properties.
func GitHubEscape(s string, property bool) string {
	r := strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A")
	s = r.Replace(s)
	if property {
		s = strings.NewReplacer(":", "%3A", ",", "%2C").Replace(s)
	}
	return s
}
