package source

import (
	"bufio"
	"bytes"
	"strings"
)

// A section is the text of one document of a stream as kubectl cuts it
// (k8s.io/apimachinery/pkg/util/yaml.YAMLReader): the lines between two separator lines, each
// ended by "\n" (a "\r" before it removed).
type section struct {
	text []byte
	line int // line of the file the text starts on
}

// A separatorError is a line that starts with "---" but is not a separator: kubectl stops
// reading the stream there.
type separatorError struct {
	line int
	rest string
}

// split cuts data into sections as kubectl does: a line that starts with "---" ends a section
// if the rest of the line is blank or a comment, and starts the next one (it stays in its text)
// if there is no section to end. A line that starts with "---" followed by anything else is a
// separatorError, and is left out; kubectl stops there, whereas the text before it is still a
// section here, and reading goes on after it.
//
// Lines are read as kubectl reads them (bufio.Reader.ReadLine, 4096-byte buffer), which leaves
// out a last line without a newline whose length is a multiple of 4096 bytes; lost is its line
// number then, else 0.
func split(data []byte) (secs []section, seps []separatorError, lost int) {
	var buf []byte
	start := 0 // line the text in buf starts on
	flush := func() {
		if len(buf) > 0 {
			secs = append(secs, section{text: buf, line: start})
			buf = nil
		}
	}
	r := bufio.NewReaderSize(bytes.NewReader(data), 4096)
	for lineNo := 1; ; lineNo++ {
		line, more, err := r.ReadLine() // valid until the next read
		if more {
			line = append([]byte(nil), line...)
			for more && err == nil {
				var part []byte
				part, more, err = r.ReadLine()
				line = append(line, part...)
			}
		}
		if err != nil { // io.EOF: a bytes.Reader fails no other way
			if len(line) > 0 {
				lost = lineNo
			}
			break
		}
		if bytes.HasPrefix(line, []byte("---")) {
			rest := strings.TrimSpace(string(line[3:]))
			if rest != "" && rest[0] != '#' {
				seps = append(seps, separatorError{line: lineNo, rest: rest})
				flush()
				continue
			}
			if len(buf) > 0 {
				flush()
				continue
			}
			// kubectl keeps a separator that starts a section: YAML reads it as such.
		}
		if len(buf) == 0 {
			start = lineNo
		}
		buf = append(append(buf, line...), '\n')
	}
	flush()
	return secs, seps, lost
}
