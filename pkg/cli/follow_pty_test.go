//go:build linux || darwin

package cli

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/creack/pty"
	helmrelease "helm.sh/helm/v3/pkg/release"
)

// install --wait on a real pseudo-terminal 60 columns wide: the bar is redrawn in place
// (carriage return and ANSI erase, no newline between frames), fills up to 3/3, never runs
// past the width, warnings come as lines above it, and the final line replaces it.
func TestFollowOnATerminal(t *testing.T) {
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Fatalf("open a pseudo-terminal: %v", err)
	}
	defer ptmx.Close()
	const cols = 60
	if err := pty.Setsize(ptmx, &pty.Winsize{Rows: 24, Cols: cols}); err != nil {
		t.Fatal(err)
	}
	read := make(chan []byte)
	go func() {
		var b bytes.Buffer
		_, err := io.Copy(&b, ptmx)
		if err != nil && !errors.Is(err, syscall.EIO) { // EIO: the terminal side is closed
			t.Errorf("read the terminal: %v", err)
		}
		read <- b.Bytes()
	}()

	s := &scripted{steps: installSteps(step(helmrelease.StatusDeployed, "Install complete", nil))}
	err = runCmd(t, s.serve(t), tty, "install", "web", "https://charts.example.com/tiny-0.1.0.tgz", "--wait")
	tty.Close()
	if err != nil {
		t.Fatal(err)
	}
	var raw []byte
	select {
	case raw = <-read:
	case <-time.After(10 * time.Second):
		t.Fatal("the terminal's output never ended")
	}
	// The terminal turns each \n into \r\n on output.
	out := strings.ReplaceAll(string(raw), "\r\n", "\n")
	t.Logf("terminal output: %q", out)

	if n := strings.Count(out, eraseLine); n < len(s.steps)-1 {
		t.Errorf("%d redraws (\\r ESC[K), want one per poll (%d)", n, len(s.steps)-1)
	}
	// Everything after the install's answer is frames, warnings and the final line.
	i := strings.Index(out, eraseLine)
	if i < 0 {
		t.Fatal("no redraw at all")
	}
	var frames []string
	for _, seg := range strings.Split(out[i:], eraseLine)[1:] {
		line, rest, isLine := strings.Cut(seg, "\n")
		switch {
		case isLine && rest != "":
			t.Errorf("two lines in one draw: %q", seg)
		case isLine && strings.HasPrefix(line, "warning: "), isLine && strings.HasPrefix(line, "web: deployed"):
		case isLine:
			t.Errorf("a frame ended with a newline (the bar must redraw in place): %q", seg)
		default:
			frames = append(frames, line)
			if n := utf8.RuneCountInString(line); n >= cols {
				t.Errorf("%d columns on a %d-column terminal: %q", n, cols, line)
			}
		}
	}
	if len(frames) != len(s.steps)-1 {
		t.Errorf("%d frames, want %d", len(frames), len(s.steps)-1)
	}
	last := frames[len(frames)-1]
	if !strings.Contains(last, "[████████████████████] 3/3 post hooks") {
		t.Errorf("the last frame is not full at 3/3: %q", last)
	}
	if f := frames[5]; !strings.Contains(f, "[░░░░░░░░░░░░░░░░░░░░] 0/3 waiting") || !strings.HasSuffix(f, "…") {
		t.Errorf("the waiting frame (0/3, cut to the width): %q", f)
	}
	if frames[0][:3] == frames[1][:3] {
		t.Errorf("the spinner did not turn: %q, %q", frames[0], frames[1])
	}
	for _, w := range []string{eraseLine + "warning: " + warnProbe + "\n", eraseLine + "warning: " + warnPull + "\n"} {
		if strings.Count(out, w) != 1 {
			t.Errorf("warning %q shown %d times, want once", w, strings.Count(out, w))
		}
	}
	if !strings.HasSuffix(out, eraseLine+"web: deployed, revision 1 (24s)\n") {
		t.Errorf("the final line does not replace the bar: %q", out[max(0, len(out)-80):])
	}
}
