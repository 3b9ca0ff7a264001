package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/alecthomas/kong"
	"github.com/posener/complete"
	"github.com/willabides/kongplete"
)

// Shell completion: the shell runs mqgate itself with COMP_LINE set (the
// protocol of posener/complete, which kongplete answers from the kong
// model: commands, flags, enum values); topic and group names come from
// the server of MQGATE_SERVER (and MQGATE_USER, MQGATE_PASSWORD,
// MQGATE_TOKEN), through the generated client.

// completionCmd prints the script that wires a shell to mqgate.
type completionCmd struct {
	Shell string `arg:"" help:"bash, zsh or fish." enum:"bash,zsh,fish"`
}

// completionScripts are the scripts of each shell; %[1]s is the binary,
// %[2]s the command name.
var completionScripts = map[string]string{
	"bash": "complete -o default -C %[1]q %[2]s\n",
	"zsh":  "autoload -U +X bashcompinit && bashcompinit\ncomplete -o default -C %[1]q %[2]s\n",
	"fish": `function __complete_%[2]s
    set -lx COMP_LINE (commandline -cp)
    test -z (commandline -ct)
    and set COMP_LINE "$COMP_LINE "
    %[1]q
end
complete -f -c %[2]s -a "(__complete_%[2]s)"
`,
}

// Run prints the script of the shell: `source <(mqgate completion bash)`.
func (c *completionCmd) Run(k *kong.Context) error {
	bin, err := os.Executable()
	if err != nil {
		return err
	}
	if bin, err = filepath.Abs(bin); err != nil {
		return err
	}
	_, err = fmt.Fprintf(k.Stdout, completionScripts[c.Shell], bin, k.Model.Name)
	return err
}

// complete answers a completion request and exits when the shell asked
// for one (COMP_LINE is set); it returns otherwise.
func completeRequest(parser *kong.Kong) {
	kongplete.Complete(parser,
		kongplete.WithPredictor("topic", namePredictor(func(ctx context.Context, a *admin) ([]string, error) {
			res, err := apiCall(a.c.ListTopicsWithResponse(ctx))
			if err != nil {
				return nil, err
			}
			names := make([]string, len(res.JSON200.Topics))
			for i, t := range res.JSON200.Topics {
				names[i] = t.Name
			}
			return names, nil
		})),
		kongplete.WithPredictor("group", namePredictor(func(ctx context.Context, a *admin) ([]string, error) {
			res, err := apiCall(a.c.ListGroupsWithResponse(ctx))
			if err != nil {
				return nil, err
			}
			names := make([]string, len(res.JSON200.Groups))
			for i, g := range res.JSON200.Groups {
				names[i] = g.Name
			}
			return names, nil
		})),
	)
}

// namePredictor completes names listed by the server of the environment;
// nothing when it cannot be reached within a second.
func namePredictor(list func(context.Context, *admin) ([]string, error)) complete.Predictor {
	return complete.PredictFunc(func(args complete.Args) []string {
		f := adminFlags{Server: os.Getenv("MQGATE_SERVER"), User: os.Getenv("MQGATE_USER"), Password: os.Getenv("MQGATE_PASSWORD"),
			Token: os.Getenv("MQGATE_TOKEN"), CAFile: os.Getenv("MQGATE_CA_FILE"), Output: "table"}
		if f.Server == "" {
			f.Server = "http://127.0.0.1:8080"
		}
		a, err := f.ProvideAdmin()
		if err != nil {
			return nil
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		names, err := list(ctx, a)
		if err != nil {
			return nil
		}
		var out []string
		for _, n := range names {
			if strings.HasPrefix(n, args.Last) {
				out = append(out, n)
			}
		}
		return out
	})
}
