package config_test

import (
	"fmt"

	"github.com/symheap/symheap/internal/config"
)

func ExampleParseSize() {
	for _, s := range []string{"4096", "64k", "512M", "2g", "1.5g"} {
		n, err := config.ParseSize(s)
		if err != nil {
			fmt.Println("error:", s)
			continue
		}
		fmt.Println(s, "=", n, "=", config.FormatSize(n))
	}
	// Output:
	// 4096 = 4096 = 4k
	// 64k = 65536 = 64k
	// 512M = 536870912 = 512m
	// 2g = 2147483648 = 2g
	// error: 1.5g
}
