package peers

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// sessionMembers lists the live (non-zombie) processes whose session id is
// sid, from /proc/<pid>/stat.
func sessionMembers(sid int) []int {
	dir, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	defer dir.Close()
	names, _ := dir.Readdirnames(-1)
	var pids []int
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil {
			continue
		}
		data, err := os.ReadFile("/proc/" + name + "/stat")
		if err != nil {
			continue // gone meanwhile
		}
		// "pid (comm) state ppid pgrp session ...": comm may hold spaces
		// and parentheses, so count fields after the last ')'.
		s := string(data)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 4 || f[0] == "Z" || f[0] == "X" { // dead already
			continue
		}
		if id, err := strconv.Atoi(f[3]); err == nil && id == sid {
			pids = append(pids, pid)
		}
	}
	return pids
}

// processAlive reports whether pid exists and is not a zombie.
func processAlive(pid int) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return false
	}
	f := strings.Fields(s[i+1:])
	return len(f) > 0 && f[0] != "Z" && f[0] != "X"
}

// killSession sends SIGKILL to every process of session sid until none is
// left (a few rounds, in case one forked meanwhile).
func killSession(sid int) {
	if sid <= 1 || sid == os.Getpid() {
		return
	}
	if self, _, errno := syscall.RawSyscall(syscall.SYS_GETSID, 0, 0, 0); errno == 0 && int(self) == sid {
		return // never our own session
	}
	_ = syscall.Kill(-sid, syscall.SIGKILL)
	for round := 0; round < 50; round++ {
		pids := sessionMembers(sid)
		if len(pids) == 0 {
			return
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
