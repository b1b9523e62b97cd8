package main

import (
	"fmt"
	"strings"

	"github.com/symheap/symheap/internal/transport"
)

// multiNode describes how this build reaches PEs on other nodes: its
// transports and bootstraps, best first, and UCX's details.
func multiNode() string {
	var ts, bs []string
	for _, t := range transport.Transports() {
		ts = append(ts, t.Name)
	}
	for _, b := range transport.Boots() {
		bs = append(bs, b.Name)
	}
	return fmt.Sprintf("transports %s, bootstraps %s (the rendezvous joins with SYMHEAP_BOOT=host:port); %s",
		strings.Join(ts, ", "), strings.Join(bs, ", "), ucxDetail())
}
