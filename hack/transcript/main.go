// Command transcript turns the output of make demo into docs/demo.md: every line from the
// demo's start marker ("== demo") on, with the time elapsed since that marker, and a table
// of the steps (the oc helm commands) with theirs. It echoes its input as it reads it, so
// the run can be watched.
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"time"
)

// ansi matches terminal escapes (a progress bar's redraws), which a transcript leaves out.
var ansi = regexp.MustCompile(`\x1b\[[0-9;?]*[A-Za-z]`)

func main() {
	out := flag.String("o", "docs/demo.md", "transcript to write")
	title := flag.String("title", "make demo", "what was run")
	flag.Parse()
	if err := run(os.Stdin, os.Stdout, *out, *title, time.Now); err != nil {
		fmt.Fprintln(os.Stderr, "transcript:", err)
		os.Exit(1)
	}
}

type line struct {
	at   time.Duration
	text string
}

func run(in io.Reader, echo io.Writer, out, title string, now func() time.Time) error {
	var lines []line
	var start time.Time
	var rev string // the commit when the demo started (its binaries were built from it)
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		raw := sc.Text()
		fmt.Fprintln(echo, raw)
		at := now()
		if start.IsZero() {
			if !strings.HasPrefix(raw, "== demo") {
				continue
			}
			start, rev = at, commit()
		}
		text := raw
		if i := strings.LastIndex(text, "\r"); i >= 0 {
			text = text[i+1:]
		}
		lines = append(lines, line{at: at.Sub(start), text: strings.TrimRight(ansi.ReplaceAllString(text, ""), " ")})
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if start.IsZero() {
		return fmt.Errorf("no %q line in the input: the demo did not start", "== demo")
	}
	return os.WriteFile(out, render(title, rev, start, lines), 0o644)
}

func render(title, rev string, start time.Time, lines []line) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# The demo, as it ran\n\n")
	fmt.Fprintf(&b, "Written by `make demo-doc` from a real `%s` on %s (commit %s, %s).\n",
		title, start.UTC().Format("2006-01-02 15:04 MST"), rev, machine())
	fmt.Fprintf(&b, "Each line carries the time elapsed since the demo started (m:ss).\n\n")
	fmt.Fprintf(&b, "## Steps\n\n| at | step |\n|---|---|\n")
	for _, l := range lines {
		if strings.HasPrefix(l.text, "$ ") || strings.HasPrefix(l.text, "# ") {
			fmt.Fprintf(&b, "| %s | `%s` |\n", clock(l.at), strings.ReplaceAll(strings.TrimPrefix(l.text, "# "), "|", `\|`))
		}
	}
	fmt.Fprintf(&b, "\n## Transcript\n\n```\n")
	for _, l := range lines {
		fmt.Fprintf(&b, "%5s  %s\n", clock(l.at), l.text)
	}
	fmt.Fprintf(&b, "```\n")
	return b.Bytes()
}

func clock(d time.Duration) string {
	s := int(d.Round(time.Second).Seconds())
	return fmt.Sprintf("%d:%02d", s/60, s%60)
}

func commit() string {
	out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}

// machine says what the figures were measured on: cores and the load average at the end.
func machine() string {
	load, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(load))
	avg := "?"
	if len(f) > 0 {
		avg = f[0]
	}
	n, _ := exec.Command("nproc").Output()
	return fmt.Sprintf("%s cores, load average %s", strings.TrimSpace(string(n)), avg)
}
