// Package deploy holds no product code: it is the module of the deployment's
// contract test (deploy_test.go). The test renders every kustomization under
// k8s/ with kustomize as a library, decodes each object strictly into the
// Kubernetes API types, checks what the manifests promise about zoned and
// NATS against the real zoned binary and a real nats-server, and runs zoned
// with the manifests' own arguments. It is a module of its own so that the
// product's go.mod stays free of Kubernetes dependencies (as bench/peers keeps
// kcp-go out); `make deploy-check` runs it and `make test` includes it.
package deploy
