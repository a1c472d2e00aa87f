// pause: the process of the test's only image (pod sandboxes and containers alike). It
// waits for SIGTERM or SIGINT and exits 0; built static (CGO_ENABLED=0) so the image holds
// this one file.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGTERM, syscall.SIGINT)
	<-c
}
