//go:build tools

// Package tools pins the commands this module builds: the Prometheus Operator and the
// config reloader it runs beside each Prometheus (tests/cluster/prometheus.py). The
// version is the one whose CRDs tests/support/monitoring_crds.py installs.
package tools

import (
	_ "github.com/prometheus-operator/prometheus-operator/cmd/operator"
	_ "github.com/prometheus-operator/prometheus-operator/cmd/prometheus-config-reloader"
)
