package launch

import (
	"errors"
	"fmt"
	"syscall"
	"time"
)

// Errors Wait and Run wrap; test with errors.Is. Bad options wrap
// errs.ErrBadConfig.
var (
	// ErrFailed: a PE exited with a non-zero status or was killed by a
	// signal; the message names the first one.
	ErrFailed = errors.New("launch: a PE failed")
	// ErrTimeout: Options.Timeout passed before every PE had ended.
	ErrTimeout = errors.New("launch: job timed out")
	// ErrStopped: Group.Stop ended the job.
	ErrStopped = errors.New("launch: job stopped")
	// ErrProgram: the program is neither an executable nor a Go main
	// package, or it could not be built or started.
	ErrProgram = errors.New("launch: cannot run program")
	// ErrStalled: every PE still running after the others had exited
	// stayed stopped (SIGSTOP) for the peer timeout, and the launcher
	// killed them; the message names them.
	ErrStalled = errors.New("launch: PEs stayed stopped")
)

// Exit statuses the job reports when the launcher itself ended it and no
// PE had failed before.
const (
	StatusTimeout = 124                        // Options.Timeout passed (as timeout(1) does)
	StatusStopped = 128 + int(syscall.SIGTERM) // context cancelled or Group.Stop
	// StatusStalled: the last PEs stayed stopped (ErrStalled). It is what
	// a shell reports for a job stopped by SIGSTOP.
	StatusStalled = 128 + int(syscall.SIGSTOP)
)

// Result describes a finished job.
type Result struct {
	Job string
	// PEs holds one entry per rank.
	PEs []PEStatus
	// FirstFailed is the rank of the first PE seen to fail (non-zero exit
	// or a signal it was not sent by the launcher's stop; a PE already
	// killed by a signal when the first exit with a status is collected
	// comes before it); -1 if none did.
	FirstFailed int
	// Status is the job's exit status: 0 when every PE exited 0, else the
	// status of the first failing PE, else StatusTimeout, StatusStopped
	// or StatusStalled when the launcher ended the job.
	Status int
	// TimedOut reports that Options.Timeout ended the job.
	TimedOut bool
	// Stalled lists the PEs the launcher killed because they, the last
	// ones left, stayed stopped for the peer timeout (ErrStalled).
	Stalled []int
	// Elapsed runs from the start of the first PE to the reaping of the
	// last.
	Elapsed time.Duration
	// Removed lists the /dev/shm files of the job that were still there
	// after its last PE ended, and were removed.
	Removed []string
}

// PEStatus is how one PE ended.
type PEStatus struct {
	Rank int
	Pid  int
	// ExitCode is the exit status of a PE that exited; -1 for one killed
	// by a signal.
	ExitCode int
	// Signal is the signal that killed the PE; 0 when it exited.
	Signal syscall.Signal
	// Stopped reports that the launcher had sent the PE its stop signal
	// (Options.StopSignal, SIGTERM by default, then SIGKILL) before it saw
	// the PE end.
	Stopped bool
	// Runtime runs from the PE's start to its end; Ended from the job's
	// start to the PE's end.
	Runtime, Ended time.Duration
}

// Status is the PE's status as a shell reports it: the exit code, or 128
// plus the number of the signal that killed it.
func (s PEStatus) Status() int {
	if s.Signal != 0 {
		return 128 + int(s.Signal)
	}
	return s.ExitCode
}

// Failed reports whether the PE exited non-zero or was killed.
func (s PEStatus) Failed() bool { return s.Status() != 0 }

func (s PEStatus) String() string {
	if s.Signal != 0 {
		return fmt.Sprintf("PE %d (pid %d) killed by signal %d (%v), status %d", s.Rank, s.Pid, int(s.Signal), s.Signal, s.Status())
	}
	return fmt.Sprintf("PE %d (pid %d) exit status %d", s.Rank, s.Pid, s.ExitCode)
}
