package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/mqgate/mqgate/server/auth"
)

// hashSecretCmd prints the argon2id hash of a secret read from standard
// input (never from the command line, which other users can see), for
// secretKeyHash in the ACL file.
type hashSecretCmd struct{}

// Run reads one line and prints its hash.
func (hashSecretCmd) Run() error {
	line, err := bufio.NewReader(os.Stdin).ReadString('\n')
	if err != nil && line == "" {
		return errors.New("hash-secret: write the secret on standard input, e.g. printf %s \"$SECRET\" | mqgate hash-secret")
	}
	secret := strings.TrimRight(line, "\r\n")
	if len(secret) < 8 {
		return fmt.Errorf("hash-secret: the secret is %d bytes; use at least 8 (better: openssl rand -base64 24)", len(secret))
	}
	phc, err := auth.HashArgon2id(secret)
	if err != nil {
		return err
	}
	fmt.Println(phc)
	return nil
}
