// Command etcd is upstream's server/main.go: etcd/server/v3 carries replace
// directives, so `go install` cannot build it directly.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
