// Command registry is the CNCF Distribution registry with only the filesystem storage
// driver: the local cluster's image and chart registry (tests/cluster/registry.py).
//
// Upstream's cmd/registry links every storage driver (S3, Azure, GCS and their SDKs,
// CloudFront): several hundred packages that a registry on local disk never uses. The
// root command and the HTTP handlers are upstream's own, unchanged.
package main

import (
	"github.com/distribution/distribution/v3/registry"

	_ "github.com/distribution/distribution/v3/registry/storage/driver/filesystem"
)

func main() {
	// RootCmd exits non-zero by itself when serving fails.
	_ = registry.RootCmd.Execute()
}
