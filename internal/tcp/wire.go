package tcp

import (
	"encoding/binary"
	"io"
)

// The wire format. A connection starts with the handshake (hello), then
// carries requests from the dialling PE (the client) and replies from
// the dialled one (the server), each a fixed header followed by n bytes.
// Integers are little-endian.

// helloMagic opens the handshake; its last byte is the protocol version.
const helloMagic = "SYMHTCP\x01"

// Request operations.
const (
	opPut   = 1 // off, n bytes of data follow; no reply (refusal: next flush)
	opGet   = 2 // off, n bytes wanted; replyGet
	opAMO   = 3 // amo, size, off, v, cmp; replyAMO if id != 0 (refusal of a non-fetching one: next flush)
	opMsg   = 4 // off is the tag, n bytes of message follow; no reply
	opFlush = 5 // replyFlush once everything before it is performed
	opBye   = 6 // the client's goodbye: nothing follows
	opAbort = 7 // the client gave up on this connection during the handshake
)

// Reply operations.
const (
	replyGet   = 1 // n bytes of data (or of the refusal's text)
	replyAMO   = 2 // v is the previous value
	replyFlush = 3 // status: a refusal of an earlier put or atomic, its text in n bytes
	replyBye   = 4 // the server's goodbye
)

// Reply statuses.
const (
	statusOK      = 0
	statusRefused = 1 // n bytes of text say why
)

// reqSize is the size of a request's header.
const reqSize = 48

// req is a request's header.
type req struct {
	op, amo, size uint8
	region        uint32
	id            uint64 // the call waiting for the reply; 0: no reply
	off           uint64 // offset in the region; opMsg: the tag
	n             uint64 // bytes that follow (opPut, opMsg) or wanted (opGet)
	v, cmp        uint64 // opAMO's operands
}

func (h *req) encode(b *[reqSize]byte) {
	b[0], b[1], b[2], b[3] = h.op, h.amo, h.size, 0
	binary.LittleEndian.PutUint32(b[4:], h.region)
	binary.LittleEndian.PutUint64(b[8:], h.id)
	binary.LittleEndian.PutUint64(b[16:], h.off)
	binary.LittleEndian.PutUint64(b[24:], h.n)
	binary.LittleEndian.PutUint64(b[32:], h.v)
	binary.LittleEndian.PutUint64(b[40:], h.cmp)
}

func (h *req) decode(b *[reqSize]byte) {
	h.op, h.amo, h.size = b[0], b[1], b[2]
	h.region = binary.LittleEndian.Uint32(b[4:])
	h.id = binary.LittleEndian.Uint64(b[8:])
	h.off = binary.LittleEndian.Uint64(b[16:])
	h.n = binary.LittleEndian.Uint64(b[24:])
	h.v = binary.LittleEndian.Uint64(b[32:])
	h.cmp = binary.LittleEndian.Uint64(b[40:])
}

// repSize is the size of a reply's header.
const repSize = 32

// rep is a reply's header.
type rep struct {
	op, status uint8
	id         uint64
	n          uint64 // bytes that follow
	v          uint64
}

func (h *rep) encode(b *[repSize]byte) {
	*b = [repSize]byte{}
	b[0], b[1] = h.op, h.status
	binary.LittleEndian.PutUint64(b[8:], h.id)
	binary.LittleEndian.PutUint64(b[16:], h.n)
	binary.LittleEndian.PutUint64(b[24:], h.v)
}

func (h *rep) decode(b *[repSize]byte) {
	h.op, h.status = b[0], b[1]
	h.id = binary.LittleEndian.Uint64(b[8:])
	h.n = binary.LittleEndian.Uint64(b[16:])
	h.v = binary.LittleEndian.Uint64(b[24:])
}

// maxMsg bounds a message's length as read from a header: a larger one is
// a protocol error, not an allocation.
const maxMsg = 1 << 36

// maxText bounds a refusal's text.
const maxText = 4096

// hello is the handshake's request: magic, the dialling PE's rank, the
// rank it wants, and the job's name.
func appendHello(b []byte, job string, from, to int) []byte {
	b = append(b, helloMagic...)
	b = binary.LittleEndian.AppendUint32(b, uint32(from))
	b = binary.LittleEndian.AppendUint32(b, uint32(to))
	b = binary.LittleEndian.AppendUint16(b, uint16(len(job)))
	return append(b, job...)
}

// readHello reads a hello; ok is false if what came is not one.
func readHello(r io.Reader) (job string, from, to int, ok bool, err error) {
	var b [len(helloMagic) + 10]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return "", 0, 0, false, err
	}
	if string(b[:len(helloMagic)]) != helloMagic {
		return "", 0, 0, false, nil
	}
	from = int(int32(binary.LittleEndian.Uint32(b[len(helloMagic):])))
	to = int(int32(binary.LittleEndian.Uint32(b[len(helloMagic)+4:])))
	j := make([]byte, binary.LittleEndian.Uint16(b[len(helloMagic)+8:]))
	if _, err := io.ReadFull(r, j); err != nil {
		return "", 0, 0, false, err
	}
	return string(j), from, to, true, nil
}

// The handshake's answer: one status byte (0: accepted), then for a
// refusal a 2-byte length and its text.
func appendAnswer(b []byte, refusal string) []byte {
	if refusal == "" {
		return append(b, 0)
	}
	b = append(b, 1)
	b = binary.LittleEndian.AppendUint16(b, uint16(len(refusal)))
	return append(b, refusal...)
}

func readAnswer(r io.Reader) (refusal string, err error) {
	var b [1]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return "", err
	}
	if b[0] == 0 {
		return "", nil
	}
	var l [2]byte
	if _, err := io.ReadFull(r, l[:]); err != nil {
		return "", err
	}
	t := make([]byte, binary.LittleEndian.Uint16(l[:]))
	if _, err := io.ReadFull(r, t); err != nil {
		return "", err
	}
	if len(t) == 0 {
		return "refused", nil
	}
	return string(t), nil
}
