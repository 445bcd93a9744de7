package event

import (
	"encoding/binary"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/ghostwire/ghostwire/replication/netsim"
	"github.com/ghostwire/ghostwire/replication/notify"
)

// chatRun sends one movement event per packet interval on lane 1 and, when
// chat is set, 10 chat events per interval on lane 0 (10,000 in all), over
// real notify + netsim at 30% loss each way. It returns when each movement
// event was delivered, and checks the chat contract on the way.
func chatRun(t *testing.T, chat bool) (moveAt []time.Duration, chats int) {
	t.Helper()
	link := func(seed uint64) netsim.Config {
		c := netsim.DefaultConfig()
		c.Loss, c.Latency, c.Jitter, c.Seed = 0.30, 50*ms, 10*ms, seed
		return c
	}
	cfg := DefaultConfig()
	cfg.Redundancy = 0 // the resend rule alone (redundant copies would share a budget)
	n := newSim(t, notify.DefaultConfig(), cfg, link(11), link(12), 50*ms, 1200)
	const moves, chatTotal = 1200, 10_000
	var failed error
	n.b.deliver = func(e Event) {
		i := int(binary.LittleEndian.Uint32(e.Payload))
		switch {
		case e.Lane == 1 && i == len(moveAt):
			moveAt = append(moveAt, n.now)
		case e.Lane == 0 && i == chats:
			chats++
		case failed == nil:
			failed = fmt.Errorf("lane %d delivered %d (moves %d, chats %d)", e.Lane, i, len(moveAt), chats)
		}
	}
	n.a.deliver = func(Event) {}
	var pl [20]byte
	sentChat := 0
	for m := 0; m < moves || len(moveAt) < moves || (chat && chats < chatTotal); {
		if n.now > 600*time.Second {
			t.Fatalf("stuck: moves %d, chats %d", len(moveAt), chats)
		}
		if m < moves && n.now >= time.Duration(m)*50*ms+7*ms {
			binary.LittleEndian.PutUint32(pl[:], uint32(m))
			must(t, n.a.s.SendOrdered(1, pl[:8]))
			m++
			for k := 0; chat && k < 10 && sentChat < chatTotal; k++ {
				binary.LittleEndian.PutUint32(pl[:], uint32(sentChat))
				must(t, n.a.s.SendOrdered(0, pl[:]))
				sentChat++
			}
		}
		if err := n.step(time.Duration(m)*50*ms + 7*ms); err != nil {
			t.Fatal(err)
		}
		if failed != nil {
			t.Fatal(failed)
		}
	}
	if chat {
		if st := n.a.s.Stats(); st.Resent == 0 {
			t.Fatal("no chat resends at 30% loss")
		}
	}
	return moveAt, chats
}

// TestRL2Acceptance is checklist RL-2's accept: under 30% simulated loss,
// 10,000 chat events arrive exactly once and in order, and dropping a chat
// packet does not delay the next movement update. The second half is checked
// exactly: netsim draws the same losses and delays for the same packet
// schedule, so the movement lane must be delivered at the very same instants
// with and without the chat traffic (and its losses and resends) beside it.
func TestRL2Acceptance(t *testing.T) {
	withChat, chats := chatRun(t, true)
	if chats != 10_000 {
		t.Fatalf("chats delivered %d, want 10000", chats)
	}
	alone, _ := chatRun(t, false)
	if !slices.Equal(withChat, alone) {
		for i := range withChat {
			if withChat[i] != alone[i] {
				t.Fatalf("movement %d delivered at %v with chat, %v without: chat losses delayed it", i, withChat[i], alone[i])
			}
		}
		t.Fatalf("movement deliveries differ in length: %d vs %d", len(withChat), len(alone))
	}
}
