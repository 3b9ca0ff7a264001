package sqs_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// awsCLI is the AWS CLI of the query protocol: $MQGATE_TEST_AWS_CLI, else
// Debian's /usr/bin/aws (awscli 2.9, which .ci/run installs). Newer CLIs
// speak the JSON protocol, which the SDK tests cover.
func awsCLI(t *testing.T) string {
	t.Helper()
	path := os.Getenv("MQGATE_TEST_AWS_CLI")
	if path == "" {
		path = "/usr/bin/aws"
	}
	if _, err := os.Stat(path); err != nil {
		t.Skipf("SKIPPED: no AWS CLI at %s (apt-get install awscli, or set MQGATE_TEST_AWS_CLI): the query protocol is not tested", path)
	}
	return path
}

// cli runs the AWS CLI against endpoint and decodes its JSON output
// (nil when it prints none); it fails the test when the CLI fails.
func cli(t *testing.T, bin, endpoint string, args ...string) map[string]any {
	t.Helper()
	out, err := cliRun(t, bin, endpoint, args...)
	require.NoError(t, err, "aws %s: %s", strings.Join(args, " "), out)
	if strings.TrimSpace(out) == "" {
		return nil
	}
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &m), out)
	return m
}

func cliRun(t *testing.T, bin, endpoint string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"--endpoint-url", endpoint, "--output", "json", "sqs"}, args...)...)
	home := t.TempDir()
	cmd.Env = []string{
		"HOME=" + home, "PATH=/usr/bin:/bin",
		"AWS_ACCESS_KEY_ID=AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY=secret", "AWS_DEFAULT_REGION=us-east-1",
		"AWS_EC2_METADATA_DISABLED=true", "AWS_CONFIG_FILE=" + home + "/none", "AWS_SHARED_CREDENTIALS_FILE=" + home + "/none",
		"AWS_PAGER=", "AWS_MAX_ATTEMPTS=1",
	}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestAWSCLIQueryProtocol drives the scenarios of the SDK tests through
// the AWS CLI's query protocol.
func TestAWSCLIQueryProtocol(t *testing.T) {
	bin := awsCLI(t)
	_, s := startSQS(t)
	ep := "http://" + s.Srv.SQSAddr()

	url := cli(t, bin, ep, "create-queue", "--queue-name", "cli", "--attributes", "VisibilityTimeout=1")["QueueUrl"].(string)
	require.Equal(t, ep+"/000000000000/cli", url)
	dlq := cli(t, bin, ep, "create-queue", "--queue-name", "cli-dlq")["QueueUrl"].(string)
	require.Equal(t, url, cli(t, bin, ep, "get-queue-url", "--queue-name", "cli")["QueueUrl"])
	list := cli(t, bin, ep, "list-queues", "--queue-name-prefix", "cli")
	require.Equal(t, []any{url, dlq}, list["QueueUrls"])

	// Errors: the CLI prints the query protocol's code.
	out, err := cliRun(t, bin, ep, "get-queue-url", "--queue-name", "missing")
	require.Error(t, err)
	require.Contains(t, out, "AWS.SimpleQueueService.NonExistentQueue")

	cli(t, bin, ep, "set-queue-attributes", "--queue-url", url, "--attributes",
		`{"RedrivePolicy":"{\"deadLetterTargetArn\":\"arn:aws:sqs:us-east-1:000000000000:cli-dlq\",\"maxReceiveCount\":\"2\"}"}`)
	attrs := cli(t, bin, ep, "get-queue-attributes", "--queue-url", url, "--attribute-names", "All")["Attributes"].(map[string]any)
	require.Equal(t, "1", attrs["VisibilityTimeout"])
	require.Contains(t, attrs["RedrivePolicy"], `"maxReceiveCount":2`)

	// Send with attributes (the CLI checks the MD5s), receive, delete.
	sent := cli(t, bin, ep, "send-message", "--queue-url", url, "--message-body", "hello <&> ✓",
		"--message-attributes", `{"color":{"DataType":"String","StringValue":"blue"},"blob":{"DataType":"Binary","BinaryValue":"AAEC"}}`)
	require.NotEmpty(t, sent["MessageId"])
	got := cli(t, bin, ep, "receive-message", "--queue-url", url, "--wait-time-seconds", "5",
		"--attribute-names", "All", "--message-attribute-names", "All")
	msgs := got["Messages"].([]any)
	require.Len(t, msgs, 1)
	m := msgs[0].(map[string]any)
	require.Equal(t, "hello <&> ✓", m["Body"])
	require.Equal(t, sent["MessageId"], m["MessageId"])
	require.Equal(t, "1", m["Attributes"].(map[string]any)["ApproximateReceiveCount"])
	require.Equal(t, "blue", m["MessageAttributes"].(map[string]any)["color"].(map[string]any)["StringValue"])
	// Not deleted: visible again after 1 s with a receive count of 2, then
	// redriven to the DLQ.
	var second map[string]any
	require.Eventually(t, func() bool {
		second = cli(t, bin, ep, "receive-message", "--queue-url", url, "--wait-time-seconds", "2", "--attribute-names", "ApproximateReceiveCount")
		return second != nil && len(second["Messages"].([]any)) == 1
	}, 20*time.Second, time.Millisecond)
	require.Equal(t, "2", second["Messages"].([]any)[0].(map[string]any)["Attributes"].(map[string]any)["ApproximateReceiveCount"])
	var dead map[string]any
	require.Eventually(t, func() bool {
		dead = cli(t, bin, ep, "receive-message", "--queue-url", dlq, "--wait-time-seconds", "2")
		return dead != nil && len(dead["Messages"].([]any)) == 1
	}, 20*time.Second, time.Millisecond)
	d := dead["Messages"].([]any)[0].(map[string]any)
	require.Equal(t, "hello <&> ✓", d["Body"])
	cli(t, bin, ep, "delete-message", "--queue-url", dlq, "--receipt-handle", d["ReceiptHandle"].(string))
	out, err = cliRun(t, bin, ep, "delete-message", "--queue-url", dlq, "--receipt-handle", "garbage")
	require.Error(t, err)
	require.Contains(t, out, "ReceiptHandleIsInvalid")

	// Batches, with one failing entry and a repeated id.
	batch := cli(t, bin, ep, "send-message-batch", "--queue-url", dlq, "--entries",
		`[{"Id":"a","MessageBody":"one"},{"Id":"b","MessageBody":"two"},{"Id":"c","MessageBody":"three","DelaySeconds":1000}]`)
	require.Len(t, batch["Successful"], 2)
	require.Len(t, batch["Failed"], 1)
	out, err = cliRun(t, bin, ep, "send-message-batch", "--queue-url", dlq, "--entries", `[{"Id":"a","MessageBody":"one"},{"Id":"a","MessageBody":"two"}]`)
	require.Error(t, err)
	require.Contains(t, out, "BatchEntryIdsNotDistinct")
	var handles []any
	require.Eventually(t, func() bool {
		r := cli(t, bin, ep, "receive-message", "--queue-url", dlq, "--max-number-of-messages", "10", "--wait-time-seconds", "1")
		if r != nil {
			for _, m := range r["Messages"].([]any) {
				handles = append(handles, map[string]any{"Id": "e" + string(rune('a'+len(handles))), "ReceiptHandle": m.(map[string]any)["ReceiptHandle"]})
			}
		}
		return len(handles) == 2
	}, 20*time.Second, time.Millisecond)
	entries, _ := json.Marshal(handles)
	vis := cli(t, bin, ep, "change-message-visibility-batch", "--queue-url", dlq, "--entries",
		strings.ReplaceAll(string(entries), `"ReceiptHandle"`, `"VisibilityTimeout":60,"ReceiptHandle"`))
	require.Len(t, vis["Successful"], 2)
	del := cli(t, bin, ep, "delete-message-batch", "--queue-url", dlq, "--entries", string(entries))
	require.Len(t, del["Successful"], 2)

	srcs := cli(t, bin, ep, "list-dead-letter-source-queues", "--queue-url", dlq)
	require.Equal(t, []any{url}, srcs["queueUrls"])
	cli(t, bin, ep, "tag-queue", "--queue-url", dlq, "--tags", "env=prod,team=billing")
	cli(t, bin, ep, "untag-queue", "--queue-url", dlq, "--tag-keys", "team")
	require.Equal(t, map[string]any{"env": "prod"}, cli(t, bin, ep, "list-queue-tags", "--queue-url", dlq)["Tags"])
	cli(t, bin, ep, "purge-queue", "--queue-url", url)
	cli(t, bin, ep, "delete-queue", "--queue-url", url)
	out, err = cliRun(t, bin, ep, "get-queue-url", "--queue-name", "cli")
	require.Error(t, err)
	require.Contains(t, out, "NonExistentQueue")
}

// TestAWSCLISigV4 checks the CLI's query-protocol signatures against the
// ACL file.
func TestAWSCLISigV4(t *testing.T) {
	bin := awsCLI(t)
	ep := startSigned(t)
	run := func(key, secret string, args ...string) (string, error) {
		cmd := exec.Command(bin, append([]string{"--endpoint-url", ep, "--output", "json", "sqs"}, args...)...)
		home := t.TempDir()
		cmd.Env = []string{"HOME=" + home, "PATH=/usr/bin:/bin", "AWS_ACCESS_KEY_ID=" + key, "AWS_SECRET_ACCESS_KEY=" + secret,
			"AWS_DEFAULT_REGION=us-east-1", "AWS_EC2_METADATA_DISABLED=true", "AWS_CONFIG_FILE=" + home + "/none",
			"AWS_SHARED_CREDENTIALS_FILE=" + home + "/none", "AWS_PAGER=", "AWS_MAX_ATTEMPTS=1"}
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := run("admin", "admin-secret-1", "create-queue", "--queue-name", "orders")
	require.NoError(t, err, out)
	url := ep + "/000000000000/orders"
	out, err = run("producer", "producer-secret", "send-message", "--queue-url", url, "--message-body", "signed by the CLI")
	require.NoError(t, err, out)
	out, err = run("producer", "wrong-secret", "send-message", "--queue-url", url, "--message-body", "x")
	require.Error(t, err)
	require.Contains(t, out, "SignatureDoesNotMatch")
	out, err = run("producer", "producer-secret", "receive-message", "--queue-url", url)
	require.Error(t, err)
	require.Contains(t, out, "AccessDenied")
	out, err = run("consumer", "consumer-secret", "receive-message", "--queue-url", url, "--wait-time-seconds", "5")
	require.NoError(t, err, out)
	require.Contains(t, out, "signed by the CLI")
}
