package msg

import (
	"runtime"
	"sync"
	"testing"

	"github.com/symheap/symheap/internal/unix"
)

// TestMsgLock: goroutines on several Ps take turns on one msgLock, some
// yielding inside their critical sections (so that a claimer is
// preempted while it holds a parked lock) and between them (so that they
// move between Ps): the counter the lock guards must come out exact, and
// the lock must have been parked, claimed and stolen. Under the race
// detector parking is off (raceEnabled) and the test checks the plain
// lock, with the detector watching the counter. With parking, the turns
// repeat until steals have been many: a steal that enters early (skips
// S3) shows only when it meets a claimer inside, and one pass makes a
// few dozen steals at most.
func TestMsgLock(t *testing.T) {
	var l msgLock
	if !raceEnabled {
		if err := unix.MembarrierRegister(); err != nil {
			t.Logf("no parking: %v", err)
		} else {
			l.canPark = true
		}
	}
	if runtime.GOMAXPROCS(0) < 2 {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	}
	const goroutines, rounds = 6, 20000
	var (
		wg      sync.WaitGroup
		counter int // guarded by l
		inside  int // guarded by l: goroutines in the critical section
		parked  int // guarded by l: critical sections entered by claim
	)
	passes, done := 1, 0
	if l.canPark {
		passes = 100
	}
	for ; done < passes && (done == 0 || l.steals < 300) && !t.Failed(); done++ {
		turns(&l, &wg, goroutines, rounds, func(g, i int) {
			if l.v.Load()&lockState != lockHeld {
				parked++
			}
			inside++
			if inside != 1 {
				t.Errorf("goroutine %d: %d goroutines inside the lock", g, inside)
			}
			counter++
			if (g+i)%97 == 0 {
				runtime.Gosched() // preempted inside: its claim must hold
			}
			inside--
		})
	}
	if counter != goroutines*rounds*done {
		t.Fatalf("counter %d, want %d", counter, goroutines*rounds*done)
	}
	t.Logf("%d critical sections, %d entered by claim, %d steals", counter, parked, l.steals)
	if l.canPark && (parked == 0 || l.steals == 0) {
		t.Errorf("parking not exercised: %d claims, %d steals", parked, l.steals)
	}
}

// TestMsgLockAlone: one goroutine parks the lock on its first release and
// claims it from then on, with no locked instruction and no steal, as long
// as it stays on its P.
func TestMsgLockAlone(t *testing.T) {
	if raceEnabled {
		t.Skip("parking is off under the race detector")
	}
	if err := unix.MembarrierRegister(); err != nil {
		t.Skipf("no membarrier, no parking: %v", err)
	}
	l := msgLock{canPark: true}
	claims := 0
	for range 1000 {
		l.Lock()
		if l.v.Load()&lockState == lockParked {
			claims++
		}
		l.Unlock()
	}
	t.Logf("%d of 1000 entered by claim, %d steals", claims, l.steals)
	if claims < 900 {
		t.Errorf("%d of 1000 critical sections entered by claim", claims)
	}
}

// turns runs goroutines goroutines that each enter l rounds times, run
// inside(g, i) in the critical section, and now and then yield between
// two.
func turns(l *msgLock, wg *sync.WaitGroup, goroutines, rounds int, inside func(g, i int)) {
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range rounds {
				l.Lock()
				inside(g, i)
				l.Unlock()
				if i%13 == 0 {
					runtime.Gosched()
				}
			}
		}()
	}
	wg.Wait()
}
