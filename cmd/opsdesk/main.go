// Command opsdesk is the operation store's console and administration tool.
package main

import (
	"os"

	"github.com/opsdesk/opsdesk/internal/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr))
}
