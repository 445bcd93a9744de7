// Package tokenkey stores and finds the connect-token key: the 32-byte
// secret a token backend (zonectl token, a game's login service) seals
// connect tokens with and every zone server opens them with
// (replication/handshake.IssueToken, handshake.NewServer).
//
// One format everywhere: 64 hex digits, optionally followed by a newline;
// blank lines and lines starting with '#' are ignored. The same hex string
// works in the GHOSTWIRE_TOKEN_KEY environment variable, so a Kubernetes
// secret can be mounted as a file or injected as the variable.
//
// Where the key comes from, first match wins (Resolve):
//
//  1. an explicit file (--key FILE, zoned --key-file);
//  2. GHOSTWIRE_TOKEN_KEY;
//  3. the dev key in a data directory, DATA/token.key (DevPath), which zoned
//     generates on first start (EnsureDev) so local clients and bots can
//     mint tokens with the same key.
//
// Production deployments pass 1 or 2 and never rely on 3.
package tokenkey
