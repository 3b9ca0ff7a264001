package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/mqgate/mqgate/server"
)

// repairCmd is `mqgate repair`: after a CommitLog segment was deleted,
// truncated or zeroed below the durable high-water mark, serve refuses to
// start and names this command. It prints what a repair keeps (every
// intact frame, at its offset) and gives up (the damaged ranges and the
// messages in them, per topic and queue); with --apply it makes the
// repair (README.md, "Operations").
type repairCmd struct {
	DataDir     string          `help:"Directory of the message store (the server must be stopped)." env:"MQGATE_DATA_DIR" default:"${data_dir}"`
	SegmentSize server.ByteSize `help:"Size of a CommitLog segment the repair recreates (0: the largest one found)." env:"MQGATE_SEGMENT_SIZE" default:"0"`
	Apply       bool            `help:"Make the repair; without it nothing is changed (a dry run)."`
	Output      string          `short:"o" help:"Output format: text or json." enum:"text,json" default:"text"`
}

// Run surveys the data directory and, with --apply, repairs it.
func (c *repairCmd) Run() error {
	rep, err := server.Repair(server.RepairConfig{DataDir: c.DataDir, SegmentSize: int64(c.SegmentSize), Apply: c.Apply})
	if err != nil {
		return err
	}
	if c.Output == "json" {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	rep.WriteText(os.Stdout, c.Apply)
	if rep.Applied {
		fmt.Println("the store opens again: start the server")
	}
	return nil
}
