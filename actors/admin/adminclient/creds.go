package adminclient

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
)

// Creds are a NATS user name and password, as a dev zoned writes them
// (DATA/admin.creds, DATA/node.creds):
//
//	# comment
//	user: admin
//	password: 3f1c…
type Creds struct {
	User, Password string
}

// Users of the embedded NATS (and of the documented external config).
const (
	UserAdmin = "admin"
	UserNode  = "node"
)

// EnvCreds is the environment variable zonectl reads a credentials file
// path from when --creds is not given.
const EnvCreds = "GHOSTWIRE_CREDS"

// ReadCreds parses a user/password credentials file.
func ReadCreds(path string) (Creds, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Creds{}, fmt.Errorf("credentials: %w", err)
	}
	return ParseCreds(b)
}

// ParseCreds parses the body of a user/password credentials file.
func ParseCreds(b []byte) (Creds, error) {
	var c Creds
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			return Creds{}, errors.New("credentials: want lines \"user: NAME\" and \"password: SECRET\"")
		}
		switch strings.TrimSpace(k) {
		case "user":
			c.User = strings.TrimSpace(v)
		case "password":
			c.Password = strings.TrimSpace(v)
		}
	}
	if c.User == "" || c.Password == "" {
		return Creds{}, errors.New("credentials: want lines \"user: NAME\" and \"password: SECRET\"")
	}
	return c, nil
}

// WriteCreds writes c to path with mode 0600 (replacing the file).
func WriteCreds(path string, c Creds, comment string) error {
	var b strings.Builder
	for _, l := range strings.Split(comment, "\n") {
		fmt.Fprintf(&b, "# %s\n", l)
	}
	fmt.Fprintf(&b, "user: %s\npassword: %s\n", c.User, c.Password)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(b.String()), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// NewPassword returns 32 random hex digits.
func NewPassword() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// CredsOption is the nats.Option for a credentials file: a NATS .creds
// file (user JWT and nkey seed, for an operator-mode NATS) or a
// user/password file.
func CredsOption(path string) (nats.Option, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("credentials: %w", err)
	}
	if bytes.Contains(b, []byte("BEGIN NATS USER JWT")) {
		return nats.UserCredentials(path), nil
	}
	c, err := ParseCreds(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return nats.UserInfo(c.User, c.Password), nil
}

// Redact hides a password in a NATS URL for messages.
func Redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return raw
	}
	return u.Redacted()
}

func timeUntil(t time.Time) time.Duration {
	d := time.Until(t)
	if d < time.Millisecond {
		d = time.Millisecond
	}
	return d
}
