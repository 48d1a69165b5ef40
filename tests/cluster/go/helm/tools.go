//go:build tools

// Package tools pins the commands this module builds.
package tools

import (
	_ "helm.sh/helm/v4/cmd/helm"
)
