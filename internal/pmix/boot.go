//go:build ucx

package pmix

import (
	"fmt"

	"github.com/symheap/symheap/internal/transport"
)

// The transport.Bootstrap over PMIx, registered as "PMIx": tried first,
// whenever a PMIx launcher started the process.

func init() {
	transport.RegisterBoot(transport.Boot{Name: "PMIx", Priority: 20, Detect: detect})
}

// detect joins the launcher when the environment names a PMIx server
// (and SYMHEAP_PMIX is not 0).
func detect(getenv func(string) string, _ transport.Who) (transport.Bootstrap, error) {
	if !Available() || getenv("SYMHEAP_PMIX") == "0" {
		return nil, nil
	}
	c, err := Init()
	if err != nil {
		return nil, fmt.Errorf("joining the PMIx launcher: %w", err)
	}
	return boot{c}, nil
}

// boot is a Client as a transport.Bootstrap.
type boot struct{ c *Client }

func (b boot) Name() string             { return "PMIx" }
func (b boot) Rank() int                { return b.c.Rank }
func (b boot) Size() int                { return b.c.Size }
func (b boot) Job() string              { return "pmix-" + b.c.Namespace }
func (b boot) Nodes() ([]string, error) { return b.c.Nodes() }
func (b boot) Fence() error             { return b.c.Fence(true) }
func (b boot) Close()                   { b.c.Finalize() }

func (b boot) Publish(key string, val []byte) error {
	if err := b.c.Put(key, val); err != nil {
		return err
	}
	return b.c.Commit()
}

func (b boot) Get(rank int, key string) ([]byte, error) { return b.c.Get(rank, key) }

func (b boot) Lost() (int, string, bool) { return b.c.Lost() }
