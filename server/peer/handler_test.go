package peer_test

import (
	"bytes"
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/mqgate/mqgate/server/peer"
)

// post sends body to the handler at addr with c and returns the status
// and the answer's body.
func post(t *testing.T, c *http.Client, addr string, body []byte) (int, string) {
	t.Helper()
	resp, err := c.Post("http://"+addr+peer.MessagesPath, peer.ContentType, bytes.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, 2, resp.ProtoMajor, "the peer port speaks h2c")
	return resp.StatusCode, string(b)
}

func client(t *testing.T, secret string) *http.Client {
	c := peer.Client(secret, nil)
	t.Cleanup(c.CloseIdleConnections)
	return c
}

// TestHandlerSecret: with a secret, a request without it or with another
// one is a 401 and steps nothing; the right one is a 204 and steps the
// batch. Without a secret nothing is checked.
func TestHandlerSecret(t *testing.T) {
	t.Parallel()
	in := newInbox()
	s := startServer(t, "", peer.Handler(in.step, peer.HandlerOptions{ID: 2, Secret: "s3cret"}))
	body := encode(t, msg(pb.MsgHeartbeat, 1, 2), msg(pb.MsgApp, 1, 2, 100))

	for name, c := range map[string]*http.Client{"none": client(t, ""), "wrong": client(t, "s3cret!"), "prefix": client(t, "s3cre")} {
		code, _ := post(t, c, s.addr, body)
		require.Equal(t, http.StatusUnauthorized, code, name)
	}
	require.Zero(t, in.len())

	code, answer := post(t, client(t, "s3cret"), s.addr, body)
	require.Equal(t, http.StatusNoContent, code, answer)
	require.Equal(t, 2, in.len())
	require.Equal(t, pb.MsgApp, in.all()[1].GetType())

	open := newInbox()
	s2 := startServer(t, "", peer.Handler(open.step, peer.HandlerOptions{ID: 2}))
	code, answer = post(t, client(t, "anything"), s2.addr, body)
	require.Equal(t, http.StatusNoContent, code, answer)
	require.Equal(t, 2, open.len())
}

// TestHandlerRefusesMalformed: every malformed body is a 400 and steps
// nothing, a body over the limit a 413 (announced or not), and a GET a 405.
func TestHandlerRefusesMalformed(t *testing.T) {
	t.Parallel()
	in := newInbox()
	s := startServer(t, "", peer.Handler(in.step, peer.HandlerOptions{ID: 2, MaxBodyBytes: 4096}))
	c := client(t, "")
	for name, body := range malformed(t) {
		code, answer := post(t, c, s.addr, body)
		require.Equal(t, http.StatusBadRequest, code, "%s: %s", name, answer)
	}
	require.Zero(t, in.len())

	big := encode(t, msg(pb.MsgApp, 1, 2, 5000))
	code, _ := post(t, c, s.addr, big)
	require.Equal(t, http.StatusRequestEntityTooLarge, code)
	// The same without a Content-Length: the limit holds while reading.
	resp, err := c.Post("http://"+s.addr+peer.MessagesPath, peer.ContentType, io.MultiReader(bytes.NewReader(big)))
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
	require.Zero(t, in.len())

	resp, err = c.Get("http://" + s.addr + peer.MessagesPath)
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)

	code, _ = post(t, c, s.addr, encode(t, msg(pb.MsgApp, 1, 2, 3000)))
	require.Equal(t, http.StatusNoContent, code)
	require.Equal(t, 1, in.len())
}
