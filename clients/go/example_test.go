package mqgate_test

import (
	"context"
	"fmt"
	"log"

	mqgate "github.com/mqgate/mqgate/clients/go"
)

// Example is the Go example of the README's "Use from your language"
// (TestReadmeExampleIsThisOne keeps the two the same): send, pull, ack,
// and an error by its problem code.
func Example() {
	ctx := context.Background()
	// With an ACL file: mqgate.New(url, mqgate.WithBasicAuth("billing-worker", secret)).
	c, err := mqgate.New("http://127.0.0.1:8080")
	if err != nil {
		log.Fatal(err)
	}
	sent, err := mqgate.Check(c.SendMessagesWithResponse(ctx, "orders", nil, mqgate.SendRequest{
		Body: mqgate.Ptr(`{"id":1001}`), Tag: mqgate.Ptr("paid"), Keys: []string{"order-1001"},
	}))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("sent", sent.JSON200.Results[0].MessageId)

	// Lease up to 16 messages, waiting up to 5 s for the first; ack each one handled.
	pulled, err := mqgate.Check(c.PullMessagesWithResponse(ctx, "billing", "orders", nil, mqgate.PullRequest{
		MaxMessages: mqgate.Ptr(16), WaitMs: mqgate.Ptr(int64(5000)),
	}))
	if err != nil {
		log.Fatal(err)
	}
	for _, m := range pulled.JSON200.Messages {
		fmt.Println(m.MessageId, m.Body)
		ack := mqgate.AckRequest{Receipts: []string{m.Receipt}}
		if _, err := mqgate.Check(c.AckMessagesWithResponse(ctx, "billing", nil, ack)); err != nil {
			log.Fatal(err)
		}
	}

	// Errors carry the problem's code, status and detail.
	if _, err := mqgate.Check(c.GetTopicWithResponse(ctx, "nope")); mqgate.IsCode(err, "topic-not-found") {
		fmt.Println("no such topic:", err)
	}
}
