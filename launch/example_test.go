package launch_test

import (
	"context"
	"fmt"
	"os"

	"github.com/symheap/symheap/launch"
)

// Run builds the Go package in testdata/hello and runs it on two PEs, with
// their output tagged by rank.
func ExampleRun() {
	res, err := launch.Run(context.Background(), launch.Options{N: 2, Tag: true, Stdout: os.Stdout}, "./testdata/hello")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("status", res.Status)
	// Unordered output:
	// [pe 0] hello from pe 0 of 2
	// [pe 1] hello from pe 1 of 2
	// status 0
}
