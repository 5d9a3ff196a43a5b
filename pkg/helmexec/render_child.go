package helmexec

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	chartsource "github.com/async-helm/async-helm/pkg/chart/source"
)

// RenderChildArg, as a binary's first argument, runs it as a render child (RunRenderChild)
// instead of its usual self.
const RenderChildArg = "__async-helm-render"

// IsRenderChild tells whether a process was started as a render child (its os.Args).
func IsRenderChild(args []string) bool {
	return len(args) > 1 && args[1] == RenderChildArg
}

// ChartRender is a dry-run render of a chart archive in a child process.
type ChartRender struct {
	Namespace   string         `json:"namespace"`
	Name        string         `json:"name"`
	Archive     []byte         `json:"archive"`
	Values      map[string]any `json:"values,omitempty"`
	KubeVersion string         `json:"kubeVersion,omitempty"`
	// Budget is what the archive may unpack to (the child checks it again before loading).
	Budget chartsource.Budget `json:"budget"`
	// Revision, when set, renders what an install (1) or an upgrade (Upgrade) to that
	// revision applies (RenderRevision) instead of the template route's dry-run install.
	Revision int  `json:"revision,omitempty"`
	Upgrade  bool `json:"upgrade,omitempty"`
}

// childJob is what a child is asked on stdin: a render or checks of values.
type childJob struct {
	Render *ChartRender  `json:"render,omitempty"`
	Checks []SchemaCheck `json:"checks,omitempty"`
}

// renderResult is what a child writes on stdout.
type renderResult struct {
	Manifest string `json:"manifest,omitempty"`
	Error    string `json:"error,omitempty"`
	// Invalid is Helm's text for values that do not meet their schemas.
	Invalid string `json:"invalid,omitempty"`
}

// init makes every binary that may start a child (submit's template route and values
// checks, the executor's values checks) its own child, whatever its main does.
func init() {
	if IsRenderChild(os.Args) {
		os.Exit(RunRenderChild(os.Args, os.Stdin, os.Stdout))
	}
}

// RunRenderChild is a render child's main: the ChartRender on in, the result on out; args
// are the process's (os.Args), the memory bound after RenderChildArg. It returns the exit
// code. The child limits its own address space first: a template that builds a huge string
// ends the child with "out of memory", never its parent.
func RunRenderChild(args []string, in io.Reader, out io.Writer) int {
	if len(args) > 2 {
		if limit, err := strconv.ParseInt(args[2], 10, 64); err == nil && limit > 0 {
			limitMemory(limit)
		}
	}
	var job childJob
	var res renderResult
	switch err := json.NewDecoder(in).Decode(&job); {
	case err != nil:
		res.Error = fmt.Sprintf("render child: read the request: %v", err)
	case job.Render != nil:
		res.Manifest, res.Error = renderArchive(*job.Render)
	default:
		var msgs strings.Builder
		for _, c := range job.Checks {
			msgs.WriteString(checkOne(c))
		}
		res.Invalid = msgs.String()
	}
	if err := json.NewEncoder(out).Encode(res); err != nil {
		return 1
	}
	return 0
}

// renderArchive loads the archive under its budget, checks the values against its
// dependencies and renders, as the template route did in process.
func renderArchive(job ChartRender) (string, string) {
	ch, err := job.Budget.Load(job.Archive)
	if err != nil {
		return "", err.Error()
	}
	check, err := job.Budget.Load(job.Archive)
	if err != nil {
		return "", err.Error()
	}
	if err := CheckDependencies(check, job.Values); err != nil {
		return "", err.Error()
	}
	if job.Revision > 0 {
		out, err := RenderRevision(RevisionRender{Namespace: job.Namespace, Name: job.Name, Revision: job.Revision,
			Upgrade: job.Upgrade, Chart: ch, Values: job.Values, KubeVersion: job.KubeVersion})
		if err != nil {
			return "", err.Error()
		}
		return out, ""
	}
	// The parent kills the child at its deadline: the context has nothing to add.
	out, err := Render(context.Background(), RenderRequest{Namespace: job.Namespace, Name: job.Name, Chart: ch,
		Values: job.Values, KubeVersion: job.KubeVersion})
	if err != nil {
		return "", err.Error()
	}
	return out, ""
}
