// Command vet is `go vet`'s own analyzers (cmd/vet's suite) behind `go vet -vettool`, with
// one difference: a package from outside the module being vetted (the standard library, a
// dependency at a version) is not analyzed for facts.
//
// go vet runs the vet tool on every dependency of the packages it checks, only to compute
// facts (printf wrappers, functions that never return), and the tool type-checks each of
// them from source. For the product that is about 1,700 packages and about 190 CPU-seconds,
// more than the rest of vet; on CI's 2 cores it is a minute and a half of a cold run
// (docs/local.md, "Run 12"). The cost of skipping: a printf wrapper defined in a dependency
// (klog.Infof, say) is not known as one, so a bad format passed to it is not reported. The
// standard library's print functions are known to printf without facts.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"golang.org/x/tools/go/analysis/passes/appends"
	"golang.org/x/tools/go/analysis/passes/asmdecl"
	"golang.org/x/tools/go/analysis/passes/assign"
	"golang.org/x/tools/go/analysis/passes/atomic"
	"golang.org/x/tools/go/analysis/passes/bools"
	"golang.org/x/tools/go/analysis/passes/buildtag"
	"golang.org/x/tools/go/analysis/passes/cgocall"
	"golang.org/x/tools/go/analysis/passes/composite"
	"golang.org/x/tools/go/analysis/passes/copylock"
	"golang.org/x/tools/go/analysis/passes/defers"
	"golang.org/x/tools/go/analysis/passes/directive"
	"golang.org/x/tools/go/analysis/passes/errorsas"
	"golang.org/x/tools/go/analysis/passes/framepointer"
	"golang.org/x/tools/go/analysis/passes/hostport"
	"golang.org/x/tools/go/analysis/passes/httpresponse"
	"golang.org/x/tools/go/analysis/passes/ifaceassert"
	"golang.org/x/tools/go/analysis/passes/loopclosure"
	"golang.org/x/tools/go/analysis/passes/lostcancel"
	"golang.org/x/tools/go/analysis/passes/nilfunc"
	"golang.org/x/tools/go/analysis/passes/printf"
	"golang.org/x/tools/go/analysis/passes/shift"
	"golang.org/x/tools/go/analysis/passes/sigchanyzer"
	"golang.org/x/tools/go/analysis/passes/slog"
	"golang.org/x/tools/go/analysis/passes/stdmethods"
	"golang.org/x/tools/go/analysis/passes/stdversion"
	"golang.org/x/tools/go/analysis/passes/stringintconv"
	"golang.org/x/tools/go/analysis/passes/structtag"
	"golang.org/x/tools/go/analysis/passes/testinggoroutine"
	"golang.org/x/tools/go/analysis/passes/tests"
	"golang.org/x/tools/go/analysis/passes/timeformat"
	"golang.org/x/tools/go/analysis/passes/unmarshal"
	"golang.org/x/tools/go/analysis/passes/unreachable"
	"golang.org/x/tools/go/analysis/passes/unsafeptr"
	"golang.org/x/tools/go/analysis/passes/unusedresult"
	"golang.org/x/tools/go/analysis/passes/waitgroup"
	"golang.org/x/tools/go/analysis/unitchecker"
)

func main() {
	if n := len(os.Args); n > 1 && strings.HasSuffix(os.Args[n-1], ".cfg") {
		skip, err := skipFactsOnly(os.Args[n-1])
		if err != nil {
			fmt.Fprintf(os.Stderr, "vet: %v\n", err)
			os.Exit(1)
		}
		if skip {
			os.Exit(0)
		}
	}
	// cmd/vet's suite as of Go 1.26 (src/cmd/vet/main.go), in its order.
	unitchecker.Main(
		appends.Analyzer, asmdecl.Analyzer, assign.Analyzer, atomic.Analyzer, bools.Analyzer,
		buildtag.Analyzer, cgocall.Analyzer, composite.Analyzer, copylock.Analyzer,
		defers.Analyzer, directive.Analyzer, errorsas.Analyzer, framepointer.Analyzer,
		httpresponse.Analyzer, hostport.Analyzer, ifaceassert.Analyzer, loopclosure.Analyzer,
		lostcancel.Analyzer, nilfunc.Analyzer, printf.Analyzer, shift.Analyzer,
		sigchanyzer.Analyzer, slog.Analyzer, stdmethods.Analyzer, stdversion.Analyzer,
		stringintconv.Analyzer, structtag.Analyzer, tests.Analyzer, testinggoroutine.Analyzer,
		timeformat.Analyzer, unmarshal.Analyzer, unreachable.Analyzer, unsafeptr.Analyzer,
		unusedresult.Analyzer, waitgroup.Analyzer,
	)
}

// unit is the part of go vet's per-package config (unitchecker.Config) read here.
type unit struct {
	ModulePath    string
	ModuleVersion string
	VetxOnly      bool
	VetxOutput    string
}

// skipFactsOnly answers an outside package's facts-only run with no facts (an empty facts
// file, which the analysis of its importers reads as "none"). A package of the module being
// vetted (or of a module replaced by a directory) has no version; the standard library has
// no module path.
func skipFactsOnly(cfgFile string) (bool, error) {
	data, err := os.ReadFile(cfgFile)
	if err != nil {
		return false, fmt.Errorf("reading %s: %w", cfgFile, err)
	}
	var u unit
	if err := json.Unmarshal(data, &u); err != nil {
		return false, fmt.Errorf("decoding %s: %w", cfgFile, err)
	}
	if !u.VetxOnly || (u.ModulePath != "" && u.ModuleVersion == "") {
		return false, nil
	}
	if err := os.WriteFile(u.VetxOutput, nil, 0o666); err != nil {
		return false, fmt.Errorf("writing %s: %w", u.VetxOutput, err)
	}
	return true, nil
}
