package store

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"sync/atomic"
	"unsafe"
)

// Ref names the holder of a slot. It is either a string the caller chose or
// a generated value. A generated ref is formatted, when first looked at, as
// 32 hex digits: 128 bits from AES-128 in counter mode under a key drawn from
// crypto/rand when the process starts, so refs are unpredictable, never repeat
// within a process and collide across processes only with the odds of two
// random 128-bit numbers. Generating one costs no allocation; formatting is
// deferred until someone asks, which keeps the uncontended lock path free of
// allocations. A RefSource hands out the counter's values in blocks, so that
// drawing a ref need not write memory that every goroutine shares.
type Ref struct {
	s string
	n uint64
}

var (
	refBlock cipher.Block
	refSalt  uint64
	refSeq   atomic.Uint64 // NewRef's counter: values below 1<<63
	refBlks  atomic.Uint64 // RefSource's blocks: values from 1<<63 below 3<<62
	refRngs  atomic.Uint64 // RefRange's ranges: values from 3<<62 up
)

func init() {
	var key [24]byte
	if _, err := rand.Read(key[:]); err != nil {
		panic("sleeplock: crypto/rand failed: " + err.Error())
	}
	b, err := aes.NewCipher(key[:16])
	if err != nil {
		panic(err)
	}
	refBlock = b
	refSalt = binary.LittleEndian.Uint64(key[16:])
}

// NewRef returns a new generated ref.
func NewRef() Ref { return Ref{n: refSeq.Add(1)} }

// refBlockBits is log2 of the refs in a RefSource's block.
const refBlockBits = 8

// RefSource hands out generated refs, as NewRef does, from blocks of 256
// counter values that it takes from the process-wide counter one block at
// a time: a caller that guards a RefSource with a mutex it holds anyway
// draws refs without a shared write on most calls. Its refs are never
// NewRef's nor another RefSource's, and as unpredictable. The zero RefSource is ready for use; it
// is not safe for concurrent use.
type RefSource struct{ next uint64 }

// New returns a new generated ref (from NewRef for a nil RefSource).
func (r *RefSource) New() Ref {
	if r == nil {
		return NewRef()
	}
	if r.next&(1<<refBlockBits-1) == 0 {
		r.next = 1<<63 | (refBlks.Add(1)<<refBlockBits)&(1<<62-1)
	}
	n := r.next
	r.next++
	return Ref{n: n}
}

// RefRangeBits is log2 of the refs in a RefRange.
const RefRangeBits = 40

// RefRange is a range of 1<<RefRangeBits generated refs, named by their
// index: a store that keeps the holders of a lock as numbers (a fencing
// token each) gives each its ref without keeping one. Its refs are never
// NewRef's, a RefSource's nor another RefRange's, and as unpredictable.
// The zero RefRange has none (IsZero).
type RefRange struct{ base uint64 }

// NewRefRange returns a range of refs of its own. A process has 1<<22
// ranges; once it has used them all, NewRefRange returns the zero
// RefRange.
func NewRefRange() RefRange {
	n := refRngs.Add(1)
	if n >= 1<<(62-RefRangeBits) {
		return RefRange{}
	}
	return RefRange{base: 3<<62 | n<<RefRangeBits}
}

// IsZero reports whether r has no refs.
func (r RefRange) IsZero() bool { return r.base == 0 }

// Ref returns the ref of index i (below 1<<RefRangeBits) of the range:
// the same ref for the same index, every time. The zero Ref for the zero
// RefRange or an index out of range.
func (r RefRange) Ref(i uint64) Ref {
	if r.base == 0 || i >= 1<<RefRangeBits {
		return Ref{}
	}
	return Ref{n: r.base | i}
}

// RefOf returns the ref named s. RefOf("") is the zero Ref.
func RefOf(s string) Ref { return Ref{s: s} }

// IsZero reports whether r names nobody.
func (r Ref) IsZero() bool { return r.s == "" && r.n == 0 }

// Generated reports whether r was made by NewRef.
func (r Ref) Generated() bool { return r.n != 0 }

// String returns the ref as text.
func (r Ref) String() string {
	if r.n == 0 {
		return r.s
	}
	// One buffer, on the heap (the cipher's interface call makes it
	// escape), holds the block in, the block out and the text, which the
	// string shares: one allocation (events carry refs as text).
	b := new([64]byte)
	binary.LittleEndian.PutUint64(b[:8], r.n)
	binary.LittleEndian.PutUint64(b[8:16], refSalt)
	refBlock.Encrypt(b[16:32], b[:16])
	hex.Encode(b[32:], b[16:32])
	return unsafe.String(&b[32], 32)
}

// Equal reports whether r and o name the same holder, also when one is a
// generated ref and the other its text.
// The zero Ref equals nothing, not even itself.
func (r Ref) Equal(o Ref) bool {
	switch {
	case r.IsZero() || o.IsZero():
		return false
	case r == o:
		return true
	case r.n != 0 && o.n != 0:
		return false
	}
	return r.String() == o.String()
}
