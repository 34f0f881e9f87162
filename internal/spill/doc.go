// Package spill keeps the err entries fluentcore could not deliver. Dir is the durable
// spill (Config.Spill.Dir): err batches that cannot be delivered are appended to segment
// files and replayed, oldest first, once the receiver is back — by this process, or by the
// next one after a crash. JSONWriter is the last resort (Config.Spill.Fallback), and Chain puts
// the two together.
//
//   - Format. A segment is a sequence of complete PackedForward frames,
//     [tag, bin(entries), {"size": n}], byte for byte what the sender writes on the wire
//     (without an ack "chunk"), so `cat Spill.Dir/*.fwd | nc fluentd 24224` replays a
//     directory by hand.
//   - Names. "%020d.fwd", a sequence number: lexical order is replay order. A segment is
//     closed once it holds segBytes and a new one is started; frames never straddle two.
//   - Durability. Every append is fsynced before it returns (err entries are rare and
//     durability is the point); the directory is fsynced after a segment is created, so
//     the new name survives a power cut too. A frame whose write or fsync fails is cut off
//     again and reported.
//   - Deletion. A segment is deleted once every frame in it was delivered (acknowledged,
//     with acks). A crash between a delivery and that deletion sends the segment's
//     delivered frames again on restart: replay is at-least-once.
//   - Damage. A frame that does not parse as a valid PackedForward request of valid entries
//     (a tail cut by a crash, garbage) ends its segment: the frames before it are replayed,
//     the rest of the segment is skipped, counted and reported (Corrupt).
//   - Ownership. Spill.Dir/LOCK is held with flock for the life of the core, so two
//     processes (or two cores) never share a directory: the second one runs without a
//     spill and reports it. The kernel drops the lock when a process dies, even by SIGKILL.
//   - Limit. The segments never hold more than maxBytes; a frame that does not fit is
//     refused with ErrFull (the caller counts it; Dir reports it once per episode).
//
// It works on encoded entries only and reports through a Reporter; it imports no other
// fluentcore package but wire (see ARCHITECTURE.md).
package spill
