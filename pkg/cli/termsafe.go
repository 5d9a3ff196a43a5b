package cli

import (
	"io"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// What oc helm prints is written by tenants: no control sequence reaches the terminal (cursor
// moves, OSC 52): through termOut and escapeLine, controls, DEL and non-UTF-8 print as \x1b.

// escapeText escapes the controls of multi-line text: newline, tab and the CR of a CRLF stay.
func escapeText(s string) string { return escapeControls(s, true) }

// escapeLine escapes every control, newline and tab included: a cell cannot start a row.
func escapeLine(s string) string { return escapeControls(s, false) }

func escapeControls(s string, multiline bool) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if kept(s, i, r, n, multiline) {
			b.WriteString(s[i : i+n])
		} else {
			q := strconv.Quote(s[i : i+n])
			b.WriteString(q[1 : len(q)-1])
		}
		i += n
	}
	return b.String()
}

// kept: the rune r of n bytes at s[i] is printed as it is.
func kept(s string, i int, r rune, n int, multiline bool) bool {
	switch {
	case r == utf8.RuneError && n == 1:
		return false
	case !unicode.IsControl(r):
		return true
	case !multiline:
		return false
	case r == '\n', r == '\t':
		return true
	case r == '\r':
		return i+1 < len(s) && s[i+1] == '\n'
	}
	return false
}

// termWriter escapes what it writes (escapeText); a rune cut between writes shows as bytes.
type termWriter struct{ w io.Writer }

// termOut is w for tenant-written text; w itself when it is one already.
func termOut(w io.Writer) io.Writer {
	if _, ok := w.(termWriter); ok || w == nil {
		return w
	}
	return termWriter{w: w}
}

// rawOut is the writer under termOut: for the live view's own sequences only.
func rawOut(w io.Writer) io.Writer {
	if t, ok := w.(termWriter); ok {
		return t.w
	}
	return w
}

func (t termWriter) Write(p []byte) (int, error) {
	if _, err := io.WriteString(t.w, escapeText(string(p))); err != nil {
		return 0, err
	}
	return len(p), nil
}
