// Package test holds the repository-wide checks; its subfolders are the
// harnesses that serve the product's tests: e2e (through real Envoy),
// chaos (faults under load), demo (the quick start's stack) and stack
// (starts the real processes). No product package imports them
// (layers_test.go).
package test
