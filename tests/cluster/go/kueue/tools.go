//go:build tools

// Package tools pins Kueue's controller manager, which the local cluster runs for the
// queueing tests (tests/cluster/kueue.py). Kueue's go.mod has no replace directives, so
// the command builds from its module as published.
package tools

import (
	_ "sigs.k8s.io/kueue/cmd/kueue"
)
