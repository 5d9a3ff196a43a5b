package docs

import (
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The house's measures (issue 42): what a new engineer can hold in mind at once.
const (
	maxFuncLines = 60  // a function of pkg/ or functions/, its signature and closing brace included
	maxFileLines = 500 // a file of pkg/, tests included
)

// Every non-test function of pkg/ and functions/ is at most maxFuncLines long.
func TestNoFunctionOverSixtyLines(t *testing.T) {
	for _, root := range []string{"../pkg", "../functions"} {
		walkGo(t, root, func(path string, f *ast.File, fset *token.FileSet) {
			for _, d := range f.Decls {
				fn, ok := d.(*ast.FuncDecl)
				if !ok || fn.Body == nil {
					continue
				}
				if n := fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line + 1; n > maxFuncLines {
					t.Errorf("%s: %s is %d lines (at most %d)", strings.TrimPrefix(path, "../"), funcName(fn), n, maxFuncLines)
				}
			}
		})
	}
}

// No file of pkg/ is over maxFileLines lines.
func TestNoPkgFileOverFiveHundredLines(t *testing.T) {
	err := filepath.WalkDir("../pkg", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") {
			return err
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if n := strings.Count(string(raw), "\n"); n > maxFileLines {
			t.Errorf("%s is %d lines (at most %d)", strings.TrimPrefix(path, "../"), n, maxFileLines)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// No non-test code of pkg/ or functions/ type-asserts a value declared as one of our
// interfaces (a port: a struct field or a parameter), nor asserts anything onto one of our
// interfaces: a port declares every method its caller uses, so a fake that lacks one cannot
// silently skip logic. Read from the syntax: declared types, not inferred ones.
func TestNoTypeAssertionOnAPort(t *testing.T) {
	files := map[string][]*ast.File{} // by import path
	fsets := map[*ast.File]*token.FileSet{}
	for _, root := range []string{"../pkg", "../functions"} {
		walkGo(t, root, func(path string, f *ast.File, fset *token.FileSet) {
			pkg := modulePath + "/" + filepath.ToSlash(filepath.Dir(strings.TrimPrefix(path, "../")))
			files[pkg] = append(files[pkg], f)
			fsets[f] = fset
		})
	}
	ports, fields := declarations(files)
	for pkg, fs := range files {
		for _, f := range fs {
			r := resolver{pkg: pkg, file: f, ports: ports}
			for _, d := range f.Decls {
				if fn, ok := d.(*ast.FuncDecl); ok && fn.Body != nil {
					r.assertions(fn, fields[pkg], func(at token.Pos, what string) {
						pos := fsets[f].Position(at)
						t.Errorf("%s:%d: %s: declare the method on the port", strings.TrimPrefix(pos.Filename, "../"), pos.Line, what)
					})
				}
			}
		}
	}
}

const modulePath = "github.com/async-helm/async-helm"

// declarations are the interfaces each package declares, and each struct's field types.
func declarations(files map[string][]*ast.File) (ports map[string]map[string]bool, fields map[string]map[string]map[string]ast.Expr) {
	ports, fields = map[string]map[string]bool{}, map[string]map[string]map[string]ast.Expr{}
	for pkg, fs := range files {
		ports[pkg], fields[pkg] = map[string]bool{}, map[string]map[string]ast.Expr{}
		for _, f := range fs {
			ast.Inspect(f, func(n ast.Node) bool {
				ts, ok := n.(*ast.TypeSpec)
				if !ok {
					return true
				}
				switch typ := ts.Type.(type) {
				case *ast.InterfaceType:
					ports[pkg][ts.Name.Name] = true
				case *ast.StructType:
					byName := map[string]ast.Expr{}
					for _, fl := range typ.Fields.List {
						for _, name := range fl.Names {
							byName[name.Name] = fl.Type
						}
					}
					fields[pkg][ts.Name.Name] = byName
				}
				return true
			})
		}
	}
	return ports, fields
}

// resolver names the types of one file.
type resolver struct {
	pkg   string
	file  *ast.File
	ports map[string]map[string]bool
}

// port says whether the type expression e names one of our interfaces.
func (r resolver) port(e ast.Expr) bool {
	switch e := e.(type) {
	case *ast.Ident:
		return r.ports[r.pkg][e.Name]
	case *ast.SelectorExpr:
		x, ok := e.X.(*ast.Ident)
		if !ok {
			return false
		}
		for _, imp := range r.file.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			name := filepath.Base(path)
			if imp.Name != nil {
				name = imp.Name.Name
			}
			if name == x.Name {
				return r.ports[path][e.Sel.Name]
			}
		}
	}
	return false
}

// assertions reports each type assertion in fn onto a port, or of a receiver's field or a
// parameter declared as one.
func (r resolver) assertions(fn *ast.FuncDecl, structs map[string]map[string]ast.Expr, report func(token.Pos, string)) {
	declared := map[string]ast.Expr{} // parameters
	for _, fl := range fn.Type.Params.List {
		for _, name := range fl.Names {
			declared[name.Name] = fl.Type
		}
	}
	var recv string
	var recvFields map[string]ast.Expr
	if fn.Recv != nil && len(fn.Recv.List) == 1 && len(fn.Recv.List[0].Names) == 1 {
		recv = fn.Recv.List[0].Names[0].Name
		recvFields = structs[funcName(fn)[:strings.Index(funcName(fn)+".", ".")]]
	}
	ast.Inspect(fn.Body, func(n ast.Node) bool {
		ta, ok := n.(*ast.TypeAssertExpr)
		if !ok {
			return true
		}
		if ta.Type != nil && r.port(ta.Type) {
			report(ta.Pos(), "type assertion onto the interface "+types.ExprString(ta.Type))
		}
		switch x := ta.X.(type) {
		case *ast.Ident:
			if typ, ok := declared[x.Name]; ok && r.port(typ) {
				report(ta.Pos(), "type assertion of "+x.Name+", a "+types.ExprString(typ))
			}
		case *ast.SelectorExpr:
			if id, ok := x.X.(*ast.Ident); ok && id.Name == recv && recv != "" {
				if typ, ok := recvFields[x.Sel.Name]; ok && r.port(typ) {
					report(ta.Pos(), "type assertion of "+types.ExprString(x)+", a "+types.ExprString(typ))
				}
			}
		}
		return true
	})
}

func funcName(fn *ast.FuncDecl) string {
	if fn.Recv == nil || len(fn.Recv.List) == 0 {
		return fn.Name.Name
	}
	recv := fn.Recv.List[0].Type
	if s, ok := recv.(*ast.StarExpr); ok {
		recv = s.X
	}
	if ix, ok := recv.(*ast.IndexExpr); ok {
		recv = ix.X
	}
	if id, ok := recv.(*ast.Ident); ok {
		return id.Name + "." + fn.Name.Name
	}
	return fn.Name.Name
}

// walkGo parses every non-test Go file under root.
func walkGo(t *testing.T, root string, visit func(path string, f *ast.File, fset *token.FileSet)) {
	t.Helper()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		visit(path, f, fset)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
