//go:build tools

// Package tools pins the commands this module builds: promtool (alert rule tests) and
// Prometheus itself (tests/cluster/prometheus.py), from the same module graph.
package tools

import (
	_ "github.com/prometheus/prometheus/cmd/prometheus"
	_ "github.com/prometheus/prometheus/cmd/promtool"
)
