package mqgate_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestReadmeExampleIsThisOne: the Go program of the README's "Use from
// your language" has Example's body as its main, so the README's code
// compiles (as this package's Example does).
func TestReadmeExampleIsThisOne(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	require.NoError(t, err)
	prog := regexp.MustCompile("(?s)## Use from your language.*?```go\n(.*?)```").FindSubmatch(readme)
	require.NotNil(t, prog, "README.md has a Go block under Use from your language")
	main := regexp.MustCompile(`(?s)func main\(\) \{\n(.*)\n\}\n$`).FindSubmatch(prog[1])
	require.NotNil(t, main, "the README's Go block is a program with func main")
	example, err := os.ReadFile("example_test.go")
	require.NoError(t, err)
	body := regexp.MustCompile(`(?s)func Example\(\) \{\n(.*)\n\}\n$`).FindSubmatch(example)
	require.NotNil(t, body)
	require.Equal(t, strings.TrimSpace(string(main[1])), strings.TrimSpace(string(body[1])))
	for _, imp := range []string{`"context"`, `"fmt"`, `"log"`, `mqgate "github.com/mqgate/mqgate/clients/go"`} {
		require.Contains(t, string(prog[1]), imp)
	}
}
