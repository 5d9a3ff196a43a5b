// The vet tool of `make vet` (go vet -vettool): go vet's analyzers, facts only from the
// module being vetted (main.go says why). In a module of its own so the product's go.mod
// does not depend on golang.org/x/tools.
module github.com/async-helm/async-helm/tools/vet

go 1.26.0

require golang.org/x/tools v0.48.0
