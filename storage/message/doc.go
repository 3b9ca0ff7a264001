// Package message defines mqgate's Message, its property keys, message ids
// and the binary payload codec that the CommitLog stores inside its record
// frames.
//
// # Where the payload sits
//
// The CommitLog (package storage/commitlog) frames every record with a
// 20-byte header of its own (total size, magic, CRC-32C over the whole
// record, the record's physical offset) and treats what follows as opaque
// bytes. Those bytes are the payload defined here. Because the frame already
// carries the physical offset and a CRC, the payload carries neither;
// Message.PhysicalOffset is filled in by the caller from the frame.
//
// # Payload layout
//
// The payload layout is part of the on-disk format; never change it. All
// integers are big-endian. Offsets are in bytes from the start of the
// payload:
//
//	offset  size  field
//	     0     4  queueId          int32
//	     4     4  flag             int32  (opaque to the store; the producer's flag)
//	     8     8  queueOffset      int64  (assigned by the store under the append lock)
//	    16     4  sysFlag          int32  (opaque system flags)
//	    20     8  bornTimestamp    int64  (unix milliseconds, set by the producer side)
//	    28     8  bornHost         Host   (IPv4 4 bytes + port uint32)
//	    36     8  storeTimestamp   int64  (unix milliseconds, set by the store)
//	    44     8  storeHost        Host
//	    52     4  reconsumeTimes   int32
//	    56     8  tagsCode         int64  (tag hash, or due time in unix ms for SCHEDULE_TOPIC_XXXX)
//	    64     4  bodyLen          uint32, then bodyLen bytes of body
//	     .     2  topicLen         uint16, then topicLen bytes of topic
//	     .     4  propertiesLen    uint32, then propertiesLen bytes of properties
//
// The properties region is a sequence of entries that exactly fills
// propertiesLen bytes:
//
//	2  keyLen    uint16, then keyLen bytes of key   (keyLen >= 1)
//	4  valueLen  uint32, then valueLen bytes of value
//
// A key appears at most once. The encoder writes the entries in ascending
// byte order of their keys, so that the encoding is canonical: the same
// message always yields the same bytes and CRC, which is what lets every
// replica of a log hold equal bytes. The decoder accepts any order (records
// written before this rule have their properties in Go map order).
//
// A Host is 8 bytes. In bornHost it is the producer's IPv4 address in
// network order followed by the port as a big-endian uint32, as in
// RocketMQ. In storeHost mqgate writes the store id instead: 8 bytes chosen
// when a data directory is first written and kept by its log (see "Store
// id" in storage/doc.go), so every copy of a log names the same store; data
// directories written before store ids carry the node's address there. A
// message id (ID) is 16 bytes: the storeHost field (8) followed by the
// record's CommitLog physical offset (8, big-endian), printed as 32
// upper-case hexadecimal characters, as RocketMQ does, so an id locates its
// record in O(1); only the offset is used to find it.
//
// The tag hash (TagsCode) is FNV-1a 64 over the tag's bytes reinterpreted as
// an int64; the empty tag hashes to 0. It is stored in ConsumeQueue entries
// and is therefore part of the on-disk format too.
//
// # Decoding rules
//
// DecodePayload rejects, with ErrCorrupt, any payload that is not exactly
// what EncodePayload would produce for some valid message: lengths that run
// past the end or leave trailing bytes, an empty or over-long topic, a body
// over MaxBodySize, properties over MaxPropertiesSize, an empty property key
// or a repeated property key. It never panics, whatever the input.
// DecodeDispatch is the allocation-free view the store's dispatcher uses; it
// performs the same structural checks except the duplicate-key check and
// returns the same values as DecodePayload for every payload DecodePayload
// accepts (for a repeated key, the last occurrence wins).
package message
