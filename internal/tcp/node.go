package tcp

import (
	"fmt"
	"os"
	"syscall"
)

// nodeName is this process's node as the rendezvous reports it:
// SYMHEAP_NODE if set, else the host name, the IPC namespace and the
// device of /dev/shm, so that processes that share neither (fake hosts on
// one machine, each with its own IPC namespace and /dev/shm) are on
// different nodes, as they cannot share a segment.
func nodeName(getenv func(string) string) string {
	if v := getenv("SYMHEAP_NODE"); v != "" {
		return v
	}
	host, err := os.Hostname()
	if err != nil {
		host = "unknown-host"
	}
	ipc, err := os.Readlink("/proc/self/ns/ipc")
	if err != nil {
		ipc = "ipc:?"
	}
	shm := "shm:?"
	if fi, err := os.Stat("/dev/shm"); err == nil {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			shm = fmt.Sprintf("shm:%d", st.Dev)
		}
	}
	return host + "/" + ipc + "/" + shm
}
