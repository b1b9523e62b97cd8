package peers

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// termGrace is how long a launcher has, after SIGTERM, to stop its ranks
// and clean up before everything left in its session is killed; also how
// long Wait waits for output pipes held by orphans.
const termGrace = 3 * time.Second

type output struct {
	stdout, stderr []byte
}

// runSession runs argv as the leader of a new session (Setsid), so that
// every process it starts, including Open MPI ranks that sit in process
// groups of their own, can be found and killed by session id. It returns
// stdout in full and the last 64 KiB of stderr.
//
// Ending, as numbered steps:
//  1. the command exits by itself: its exit error (nil on status 0) is
//     returned;
//  2. ctx ends or timeout (if > 0) passes first: the session leader's process
//     group gets SIGTERM (mpirun and oshrun forward it to their ranks and
//     remove their shared-memory files) and has termGrace to exit; as soon
//     as it has exited, or the grace is over, the rest is killed;
//  3. in every case, any process still in the session then gets SIGKILL,
//     so nothing started here outlives the call.
func runSession(ctx context.Context, timeout time.Duration, argv []string) (output, error) {
	start := time.Now()
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	var stdout bytes.Buffer
	stderr := &tailBuffer{max: 64 << 10}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout = &stdout
	cmd.Stderr = stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	cmd.WaitDelay = termGrace // orphans holding our pipes must not block Wait
	if err := ctx.Err(); err != nil {
		return output{}, ctxError(err, timeout, time.Since(start))
	}
	if err := cmd.Start(); err != nil {
		return output{}, err
	}
	sid := cmd.Process.Pid
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()

	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		_ = syscall.Kill(-sid, syscall.SIGTERM)
		// Wait() also waits for the output pipes, which orphans may hold,
		// so watch the leader itself: once it has exited (or the grace
		// period is over) kill the rest of the session.
		deadline := time.Now().Add(termGrace)
		tick := time.NewTicker(20 * time.Millisecond)
	wait:
		for {
			select {
			case <-done:
				break wait
			case <-tick.C:
				if processAlive(sid) && time.Now().Before(deadline) {
					continue
				}
				killSession(sid)
				<-done // the leader is dead now; WaitDelay bounds the pipes
				break wait
			}
		}
		tick.Stop()
		err = ctxError(ctx.Err(), timeout, time.Since(start))
	}
	killSession(sid)
	return output{stdout: stdout.Bytes(), stderr: stderr.Bytes()}, err
}

// ctxError says why a run ended early: its own timeout, when that much
// time has passed, else the caller's deadline or cancellation.
func ctxError(err error, timeout, ran time.Duration) error {
	if errors.Is(err, context.DeadlineExceeded) {
		if timeout > 0 && ran >= timeout {
			return fmt.Errorf("%w after %v; processes killed", ErrTimeout, timeout)
		}
		return fmt.Errorf("%w: the caller's deadline came after %v; processes killed", ErrTimeout, ran.Round(time.Millisecond))
	}
	return fmt.Errorf("%w; processes killed", err)
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - b.max; over > 0 {
		b.buf = append(b.buf[:0], b.buf[over:]...)
	}
	return len(p), nil
}

func (b *tailBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]byte(nil), b.buf...)
}
