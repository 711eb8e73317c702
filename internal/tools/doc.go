// Package tools pins the project's development tools (golangci-lint, the
// protobuf generators) in a module of their own, so the product's go.mod
// stays lean. Run them with `go tool -modfile=tools/go.mod NAME`.
package tools
