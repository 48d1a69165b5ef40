// Command coredns is CoreDNS with only the plugins a cluster DNS needs.
//
// Upstream's coredns.go imports core/plugin, which links every plugin (cloud DNS
// providers, etcd, geoip...): about 650 packages more than the control plane. Here the
// plugins are imported one by one and dnsserver.Directives lists them in upstream's
// order (core/dnsserver/zdirectives.go), which is what `go generate` would write from a
// trimmed plugin.cfg, without copying and editing the module.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
)

func init() {
	// Upstream's order, restricted to the plugins linked above.
	dnsserver.Directives = []string{
		"reload",
		"bind",
		"ready",
		"health",
		"errors",
		"log",
		"loadbalance",
		"cache",
		"kubernetes",
	}
}

func main() {
	coremain.Run()
}
