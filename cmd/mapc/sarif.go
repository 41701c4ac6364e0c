package main

import (
	"encoding/json"
	"path/filepath"
	"strings"

	"github.com/mapc-dev/mapc/compiler"
	"github.com/mapc-dev/mapc/compiler/diag"
)

// SARIF 2.1.0, the format code-scanning tools read: one run, mapc as the tool, one result per
// problem (error), allowed refusal (warning) and mutator left out (note), located at its file
// and line.
type sarifLog struct {
	Schema  string     `json:"$schema"`
	Version string     `json:"version"`
	Runs    []sarifRun `json:"runs"`
}

type sarifRun struct {
	Tool    sarifTool     `json:"tool"`
	Results []sarifResult `json:"results"`
}

type sarifTool struct {
	Driver sarifDriver `json:"driver"`
}

type sarifDriver struct {
	Name           string      `json:"name"`
	Version        string      `json:"version"`
	InformationURI string      `json:"informationUri"`
	Rules          []sarifRule `json:"rules"`
}

type sarifRule struct {
	ID               string       `json:"id"`
	ShortDescription sarifMessage `json:"shortDescription"`
}

type sarifMessage struct {
	Text string `json:"text"`
}

type sarifResult struct {
	RuleID    string          `json:"ruleId"`
	Level     string          `json:"level"`
	Message   sarifMessage    `json:"message"`
	Locations []sarifLocation `json:"locations,omitempty"`
}

type sarifLocation struct {
	PhysicalLocation sarifPhysical `json:"physicalLocation"`
}

type sarifPhysical struct {
	ArtifactLocation sarifArtifact `json:"artifactLocation"`
	Region           *sarifRegion  `json:"region,omitempty"`
}

type sarifArtifact struct {
	URI string `json:"uri"`
}

type sarifRegion struct {
	StartLine int `json:"startLine"`
}

var sarifRules = []sarifRule{
	{ID: "mapc/refused", ShortDescription: sarifMessage{Text: "The mutator cannot be compiled into a MutatingAdmissionPolicy exactly, or is invalid"}},
	{ID: "mapc/kept-on-gatekeeper", ShortDescription: sarifMessage{Text: "The mutator is refused and stays on Gatekeeper's webhook (allow-list)"}},
	{ID: "mapc/left-out", ShortDescription: sarifMessage{Text: "The mutator never changes an object, so no mutation is emitted for it"}},
}

func sarifResultFor(rule, level string, d diag.Problem) sarifResult {
	msg := d.Msg
	if d.Field != "" {
		msg = d.Field + ": " + msg
	}
	if d.Object != "" {
		msg = d.Object + ": " + msg
	}
	r := sarifResult{RuleID: rule, Level: level, Message: sarifMessage{Text: msg}}
	if d.File != "" && d.File != "<stdin>" {
		loc := sarifLocation{PhysicalLocation: sarifPhysical{ArtifactLocation: sarifArtifact{URI: filepath.ToSlash(d.File)}}}
		if d.Line > 0 {
			loc.PhysicalLocation.Region = &sarifRegion{StartLine: d.Line}
		}
		r.Locations = []sarifLocation{loc}
	}
	return r
}

func sarifReport(rep compileReport) ([]byte, error) {
	run := sarifRun{Tool: sarifTool{Driver: sarifDriver{Name: "mapc", Version: rep.Mapc,
		InformationURI: "https://github.com/mapc-dev/mapc", Rules: sarifRules}}, Results: []sarifResult{}}
	for _, d := range rep.Problems {
		run.Results = append(run.Results, sarifResultFor("mapc/refused", "error", d))
	}
	for _, d := range rep.Kept {
		run.Results = append(run.Results, sarifResultFor("mapc/kept-on-gatekeeper", "warning", d))
	}
	for _, m := range rep.Mutators {
		if m.Status == compiler.LeftOut {
			run.Results = append(run.Results, sarifResultFor("mapc/left-out", "note",
				diag.Problem{File: m.File, Line: m.Line, Object: m.Mutator, Msg: strings.Join(m.Reasons, "; ")}))
		}
	}
	return json.MarshalIndent(sarifLog{Schema: "https://json.schemastore.org/sarif-2.1.0.json", Version: "2.1.0", Runs: []sarifRun{run}}, "", "  ")
}
