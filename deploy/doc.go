// Package deploy holds what operators deploy beside the router, and the
// tests that keep it true to the code:
//
//   - grafana/llm-router.json, the Grafana dashboard;
//   - prometheus/prometheus.yml, a scrape configuration for the router
//     replicas' admin /metrics (static targets, and Kubernetes pod
//     annotations in a comment);
//   - prometheus/alerts.yml, the alert rules, with promtool unit tests in
//     prometheus/alerts_test.yml and a runbook in prometheus/RUNBOOK.md;
//   - kubernetes/, a kustomize base: Envoy, three router replicas, Redis,
//     with kustomization.yaml here adding the dashboard as a ConfigMap.
//
// The package has no Go API. Its tests parse every PromQL expression of the
// dashboard and the rules and check that each metric they read is one the
// router exports (package metrics), check that the dashboard keeps the
// panels operators rely on, run promtool on the rules and the
// configuration, and scrape a router running in the test process with a
// real Prometheus server. The manifests_* tests decode every Kubernetes
// manifest strictly into its API type and check their cross-references.
package deploy
