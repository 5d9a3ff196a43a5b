// Package docs holds tests that keep the documentation true to the code.
package docs

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// otherTools are variables deploy.md names that belong to Go or ko, not to async-helm.
var otherTools = []string{"CGO_ENABLED", "GOMEMLIMIT", "KO_DEFAULTBASEIMAGE"}

// setting is one variable the functions read (an envconfig tag), with its defaults.
type setting struct {
	defaults []string // the tag's default in each struct that reads it ("" none)
	required bool
}

// codeSettings reads every envconfig tag of the product's non-test Go files.
func codeSettings(t *testing.T) map[string]*setting {
	t.Helper()
	out := map[string]*setting{}
	for _, root := range []string{"../pkg", "../functions", "../cmd"} {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			ast.Inspect(f, func(n ast.Node) bool {
				field, ok := n.(*ast.Field)
				if !ok || field.Tag == nil {
					return true
				}
				raw, _ := strconv.Unquote(field.Tag.Value)
				tag := reflect.StructTag(raw)
				name := tag.Get("envconfig")
				if name == "" {
					return true
				}
				s := out[name]
				if s == nil {
					s = &setting{}
					out[name] = s
				}
				s.defaults = append(s.defaults, tag.Get("default"))
				s.required = s.required || tag.Get("required") == "true"
				return true
			})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(out) == 0 {
		t.Fatal("no envconfig tag found in the code")
	}
	return out
}

// docSettings reads the rows of deploy.md's "## Settings" table: name and default cell.
func docSettings(t *testing.T, doc string) map[string]string {
	t.Helper()
	_, section, ok := strings.Cut(doc, "\n## Settings\n")
	if !ok {
		t.Fatal(`deploy.md has no "## Settings" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	out := map[string]string{}
	for _, line := range strings.Split(section, "\n") {
		cells := strings.Split(line, "|") // "", name, read by, default, what, ""
		if len(cells) < 6 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`") {
			continue
		}
		out[strings.Trim(strings.TrimSpace(cells[1]), "`")] = strings.TrimSpace(cells[3])
	}
	return out
}

// Every setting the functions read is in deploy.md's table, with its default, and the
// table names nothing the code does not read.
func TestDeploySettingsAreTheCodes(t *testing.T) {
	raw, err := os.ReadFile("deploy.md")
	if err != nil {
		t.Fatal(err)
	}
	code, doc := codeSettings(t), docSettings(t, string(raw))
	for name, s := range code {
		cell, ok := doc[name]
		if !ok {
			t.Errorf("%s is read by the code but not in deploy.md's Settings table", name)
			continue
		}
		if msg := checkDefault(cell, s); msg != "" {
			t.Errorf("%s: %s", name, msg)
		}
	}
	for name := range doc {
		if code[name] == nil {
			t.Errorf("deploy.md's Settings table names %s, which no code reads", name)
		}
	}
}

// checkDefault compares a table's default cell with the code's, where the cell is a value
// ("" when they agree): a plain value, "N MiB", "(required)" or empty.
func checkDefault(cell string, s *setting) string {
	for _, d := range s.defaults[1:] {
		if d != s.defaults[0] {
			return "the code's defaults differ between functions: " + strings.Join(s.defaults, ", ")
		}
	}
	want := s.defaults[0]
	switch n, mib := strings.CutSuffix(cell, " MiB"); {
	case cell == "(required)":
		if !s.required {
			return "the table says required, the code does not"
		}
	case s.required:
		return "the code requires it, the table says " + strconv.Quote(cell)
	case cell == "":
		if want != "" {
			return "the table gives no default, the code's is " + want
		}
	case mib:
		if v, err := strconv.ParseInt(n, 10, 64); err != nil || strconv.FormatInt(v<<20, 10) != want {
			return "the table's default is " + cell + ", the code's " + want
		}
	case want != "" && !strings.ContainsAny(cell, " `()"):
		if cell != want {
			return "the table's default is " + cell + ", the code's " + want
		}
	}
	return ""
}

var named = regexp.MustCompile("`([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+)[=`]")

// Every variable deploy.md names anywhere is a setting the code reads, one the Makefile
// reads, or Go's or ko's own.
func TestDeployNamesOnlyRealVariables(t *testing.T) {
	raw, err := os.ReadFile("deploy.md")
	if err != nil {
		t.Fatal(err)
	}
	makefile, err := os.ReadFile("../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	code := codeSettings(t)
	for _, m := range named.FindAllStringSubmatch(string(raw), -1) {
		name := m[1]
		if code[name] == nil && !strings.Contains(string(makefile), name) && !slices.Contains(otherTools, name) {
			t.Errorf("deploy.md names %s, which neither the code nor the Makefile reads", name)
		}
	}
}
