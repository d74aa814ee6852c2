// Package helmchart tests the Helm chart deploy/helm/uid-dispenser: it
// renders the chart with Helm's own Go packages (values checked against
// values.schema.json, as helm install does) for the default values and a
// full set, and decodes every manifest strictly into the Kubernetes API
// types (k8s.io/api, and prometheus-operator's for the ServiceMonitor),
// so a misspelt or misplaced field fails here rather than in a cluster.
package helmchart
