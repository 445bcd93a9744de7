package ghost

import "errors"

var (
	// ErrConfig wraps every Config, MirrorConfig and Bounds validation failure.
	ErrConfig = errors.New("ghost: invalid config")
	// ErrClass wraps every Class or Registry.Register failure (caller bug at startup).
	ErrClass = errors.New("ghost: invalid class")
	// ErrDuplicateClass means two classes claim one wire id (RP-2: fail at startup).
	ErrDuplicateClass = errors.New("ghost: duplicate class id")
	// ErrFrozen means Register was called after a Table or Mirror started using
	// the Registry: both ends must see one fixed schema.
	ErrFrozen = errors.New("ghost: registry in use; register every class first")
	// ErrBadState means a view entry holds a State its class cannot encode (NaN,
	// position outside the world bounds, health outside its range, …).
	ErrBadState = errors.New("ghost: state not encodable")
	// ErrUnknownClass means a view entry names a class the Registry does not hold.
	ErrUnknownClass = errors.New("ghost: class not registered")
	// ErrTooManyGhosts means a view needed more ghost ids than Config.MaxGhosts;
	// the entities that did not get an id wait for the next view.
	ErrTooManyGhosts = errors.New("ghost: ghost ids exhausted")
	// ErrViewTime means SetView's now did not advance by at least a millisecond:
	// the wire stamps states in milliseconds and the client orders them by stamp.
	ErrViewTime = errors.New("ghost: view time did not advance")
	// ErrSeqOrder means Write was given a sequence number not above the last one.
	ErrSeqOrder = errors.New("ghost: packet sequence not increasing")
	// ErrNoRoom means the writer had no bit left for even an empty ghost section.
	ErrNoRoom = errors.New("ghost: no room for the ghost section")
	// ErrNameTooLong means a name exceeds MaxNameLen bytes.
	ErrNameTooLong = errors.New("ghost: name too long")
	// ErrNameNotUTF8 means a name is not valid UTF-8.
	ErrNameNotUTF8 = errors.New("ghost: name is not UTF-8")

	// Decoding errors (Mirror.Read), each wrapped in a *bitstream.ReadError
	// naming the field and bit offset.

	// ErrUnknownGhost means an update names a ghost id the mirror does not hold:
	// the server never does that (updates follow an acknowledged create).
	ErrUnknownGhost = errors.New("ghost: update for unknown ghost")
	// ErrIDWidth means a section's id width exceeds what MirrorConfig.MaxGhosts allows.
	ErrIDWidth = errors.New("ghost: id width beyond MaxGhosts")
	// ErrBadMask means an update's group mask is empty, names groups the class
	// does not have, or spells the class's default mask the long way.
	ErrBadMask = errors.New("ghost: bad group mask")
	// ErrBadPosition means a decoded position lies outside the world bounds.
	ErrBadPosition = errors.New("ghost: position outside world bounds")
)
