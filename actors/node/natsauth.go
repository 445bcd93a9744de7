package node

import (
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"path/filepath"

	natsserver "github.com/nats-io/nats-server/v2/server"

	"github.com/ghostwire/ghostwire/actors/admin/adminclient"
)

// The embedded NATS has two users (one account): the game nodes and the
// admins. A node may do anything the cluster needs (its subjects, the
// JetStream directory, serving the admin API) except publish the
// cluster-wide admin subjects; an admin may call the admin API and the
// micro discovery subjects and read its replies, and nothing else, so admin
// credentials can neither impersonate a node on the cluster subjects nor
// write the directory. Nobody connects without credentials.
// deploy/nats/auth.conf gives an external NATS the same (a test keeps the
// two in step).

// Credentials files a dev zoned writes into its data dir.
const (
	AdminCredsFile = "admin.creds"
	NodeCredsFile  = "node.creds"
)

// NodePermissions are the node user's.
func NodePermissions() *natsserver.Permissions {
	return &natsserver.Permissions{
		// gwadmin.* (two tokens) are the cluster-wide admin calls; a node
		// publishes only the per-node ones (gwadmin.node.<node>.<op>) to
		// fan out a call it serves.
		Publish:   &natsserver.SubjectPermission{Allow: []string{">"}, Deny: []string{adminclient.Prefix + ".*"}},
		Subscribe: &natsserver.SubjectPermission{Allow: []string{">"}},
	}
}

// AdminPermissions are the admin user's.
func AdminPermissions() *natsserver.Permissions {
	return &natsserver.Permissions{
		Publish:   &natsserver.SubjectPermission{Allow: []string{adminclient.Prefix + ".>", "$SRV.>"}},
		Subscribe: &natsserver.SubjectPermission{Allow: []string{"_INBOX.>"}},
	}
}

// devCreds returns the data dir's admin and node credentials, creating
// each (a random password, mode 0600) on first start; later starts reuse
// them, so zonectl's DATA/admin.creds stays valid.
func devCreds(dataDir, where string) (admin, node adminclient.Creds, err error) {
	get := func(file, user, what string) (adminclient.Creds, error) {
		path := filepath.Join(dataDir, file)
		c, err := adminclient.ReadCreds(path)
		if err == nil {
			if c.User != user {
				return c, fmt.Errorf("%s: user %q, want %q (delete the file to have a new one written)", path, c.User, user)
			}
			return c, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return c, fmt.Errorf("%s: %w (delete the file to have a new one written)", path, err)
		}
		c = adminclient.Creds{User: user, Password: adminclient.NewPassword()}
		if err := adminclient.WriteCreds(path, c, what+" credentials for the embedded NATS of the zoned whose data dir this is\n("+where+"). Keep secret."); err != nil {
			return c, fmt.Errorf("write %s: %w", path, err)
		}
		return c, nil
	}
	if admin, err = get(AdminCredsFile, adminclient.UserAdmin, "Admin (zonectl --creds)"); err != nil {
		return
	}
	node, err = get(NodeCredsFile, adminclient.UserNode, "Game node (zoned --nats-creds)")
	return
}

// authUsers are the embedded server's users.
func authUsers(admin, node adminclient.Creds) []*natsserver.User {
	return []*natsserver.User{
		{Username: node.User, Password: node.Password, Permissions: NodePermissions()},
		{Username: admin.User, Password: admin.Password, Permissions: AdminPermissions()},
	}
}

// withUser puts the credentials into a NATS URL (the node's own URL, for
// tools and tests in this process that connect as a node).
func withUser(raw string, c adminclient.Creds) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	u.User = url.UserPassword(c.User, c.Password)
	return u.String()
}

// safeURL is the NATS URL without a password, for logs.
func (l *natsLink) safeURL() string { return adminclient.Redact(l.url) }
