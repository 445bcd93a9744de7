package cluster

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	pb "github.com/ghostwire/ghostwire/proto/ghostwire/v1"
	"github.com/ghostwire/ghostwire/proto/pbconv"
)

// BenchmarkRestoreRead is a restore's read of one zone's 500 players from
// a players bucket that also holds the records of players offline
// elsewhere — every player who ever played: read=bucket, a takeover's
// (Players.InZone, every record); read=listed, a handover's (Players.Listed,
// the 500 records its take request names).
func BenchmarkRestoreRead(b *testing.B) {
	for _, offline := range []int{1_000, 100_000} {
		b.Run(fmt.Sprintf("offline=%d", offline), func(b *testing.B) {
			nc, _ := embeddedNATS(b)
			p, kv := benchPlayers(b, nc)
			js, _ := jetstream.New(nc)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			const online = 500
			for i := range offline + online {
				id := uint64(i + 1)
				cp := benchCheckpoint(id)
				rec := &pb.PlayerRecord{Player: id, Zone: "x1z0", State: pb.PlayerState_PLAYER_STATE_OFFLINE, Epoch: 3,
					Checkpoint: pbconv.CheckpointToProto(&cp)}
				if i >= offline {
					rec.Zone, rec.State, rec.Gateway = "x0z0", pb.PlayerState_PLAYER_STATE_ONLINE, "zoned-1"
				}
				v, _ := proto.Marshal(rec)
				if _, err := js.PublishAsync("$KV."+kv.Bucket()+"."+PlayerKey(id), v); err != nil {
					b.Fatal(err)
				}
			}
			select {
			case <-js.PublishAsyncComplete():
			case <-ctx.Done():
				b.Fatal("records not written")
			}
			listed := make([]uint64, online)
			for i := range listed {
				listed[i] = uint64(offline + i + 1)
			}
			for _, read := range []string{"bucket", "listed"} {
				b.Run("read="+read, func(b *testing.B) {
					for b.Loop() {
						var recs []*pb.PlayerRecord
						var err error
						if read == "bucket" {
							recs, err = p.InZone(ctx, "x0z0")
						} else {
							recs, err = p.Listed(ctx, "x0z0", listed)
						}
						if err != nil || len(recs) != online {
							b.Fatalf("%d records, %v; want %d", len(recs), err, online)
						}
					}
				})
			}
		})
	}
}
