package api

import (
	"bytes"
	"encoding/json"
	"io"
	"sync"
)

// Buffers the hot paths reuse instead of allocating per request. A send's
// body is copied into the CommitLog before Broker.Send returns (the broker
// keeps no reference to it), so the buffer it was read into can serve the
// next request; a response is written out before its buffer goes back.

// maxPooledBuffer is the largest buffer kept for reuse (a bigger one, from
// a rare large request, is left to the garbage collector).
const maxPooledBuffer = 1 << 20

var bufferPool = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// getBuffer returns an empty pooled buffer.
func getBuffer() *[]byte { return bufferPool.Get().(*[]byte) }

// putBuffer returns b to the pool.
func putBuffer(b *[]byte) {
	if cap(*b) > maxPooledBuffer {
		return
	}
	*b = (*b)[:0]
	bufferPool.Put(b)
}

// readInto reads all of rd into *b (replacing its content), with sizeHint
// (the request's Content-Length, or -1) to size the buffer once.
func readInto(b *[]byte, rd io.Reader, sizeHint int64) error {
	buf := (*b)[:0]
	if sizeHint > 0 && int64(cap(buf)) < sizeHint+1 && sizeHint < 1<<30 {
		buf = make([]byte, 0, sizeHint+1) // +1: the read that sees EOF
	}
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)] // grow
		}
		n, err := rd.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			*b = buf
			return nil
		}
		if err != nil {
			*b = buf
			return err
		}
	}
}

// jsonBuffers pools the encoders of JSON responses.
type jsonBuffer struct {
	buf bytes.Buffer
	enc *json.Encoder
}

var jsonBufferPool = sync.Pool{New: func() any {
	jb := &jsonBuffer{}
	jb.enc = json.NewEncoder(&jb.buf)
	// Responses are application/json, never HTML: < > & go as they are,
	// as appendJSONString writes them.
	jb.enc.SetEscapeHTML(false)
	return jb
}}
