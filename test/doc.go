// Package test holds the repository-wide checks; its subfolders are the
// harnesses that serve the product's tests: e2e (through real Envoy),
// chaos (faults under load) and stack (starts the real processes).
package test
