package peer

// The framing's pieces, for the tests of package peer_test.
var (
	AppendHeader  = appendHeader
	AppendMessage = appendMessage
	SplitFrames   = splitFrames
	DecodeBatch   = decodeBatch
)
