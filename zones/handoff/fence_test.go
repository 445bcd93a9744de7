package handoff

import "testing"

func TestEventFenceTake(t *testing.T) {
	var f EventFence
	for _, tc := range []struct {
		name string
		gen  uint64
		lane int
		seq  uint64
		want bool
	}{
		{"first of a numbering", 5, 0, 1, true},
		{"next", 5, 0, 2, true},
		{"a resend of an applied one", 5, 0, 2, false},
		{"an older one", 5, 0, 1, false},
		{"a gap is not waited for", 5, 0, 7, true},
		{"behind the gap's fence", 5, 0, 6, false},
		{"lanes are independent", 5, 3, 1, true},
		{"not numbered", 5, 0, 0, true},
		{"no generation", 0, 0, 1, true},
		{"a lane beyond the fence", 5, EventLanes, 1, true},
		{"a new numbering starts again", 6, 0, 1, true},
		{"lane 3 started again too", 6, 3, 1, true},
		{"and fences anew", 6, 0, 1, false},
	} {
		if got := f.Take(tc.gen, tc.lane, tc.seq); got != tc.want {
			t.Fatalf("%s: Take(%d, %d, %d) = %v, fence %+v", tc.name, tc.gen, tc.lane, tc.seq, got, f)
		}
	}
}

func TestEventFenceCovers(t *testing.T) {
	f := EventFence{Gen: 7, Last: [EventLanes]uint64{25, 3}}
	for _, tc := range []struct {
		name string
		g    EventFence
		want bool
	}{
		{"no numbering", EventFence{}, false},
		{"equal", f, true},
		{"below on every lane", EventFence{Gen: 7, Last: [EventLanes]uint64{20, 3}}, true},
		{"past on one lane", EventFence{Gen: 7, Last: [EventLanes]uint64{25, 4}}, false},
		{"past on the last lane", EventFence{Gen: 7, Last: [EventLanes]uint64{EventLanes - 1: 1}}, false},
		{"another numbering", EventFence{Gen: 8, Last: [EventLanes]uint64{1}}, false},
	} {
		if got := f.Covers(tc.g); got != tc.want {
			t.Errorf("%s: Covers %v = %v, want %v", tc.name, tc.g, got, tc.want)
		}
	}
	if (EventFence{}).Covers(EventFence{}) {
		t.Error("a fence of no numbering covers one of no numbering")
	}
}
