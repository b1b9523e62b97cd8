// Command hello is the Go package the launch tests build and run as a PE
// program: it prints one line naming its rank and the job size.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Printf("hello from pe %s of %s\n", os.Getenv("SYMHEAP_PE"), os.Getenv("SYMHEAP_NPES"))
	if len(os.Args) > 1 {
		fmt.Printf("args %q\n", os.Args[1:])
	}
}
