package xds

import (
	"testing"

	"github.com/llm-router/llm-router/state"
)

func TestWorkersListsTheSnapshotAsConfig(t *testing.T) {
	snap := state.Snapshot{Workers: []state.Worker{
		{Spec: state.WorkerSpec{ID: "w0", Address: "10.0.0.1:8000", Models: []string{"m"}, Zone: "z", Region: "r", MaxConcurrency: 4}},
		{Spec: state.WorkerSpec{ID: "w1", Address: "10.0.0.2:8000", Models: []string{"m", "n"}, MaxConcurrency: 2}},
	}}
	got := Workers(snap)
	if len(got) != 2 || got[0].ID != "w0" || got[0].Address != "10.0.0.1:8000" || got[0].Zone != "z" || got[0].Region != "r" ||
		got[0].MaxConcurrency != 4 || len(got[1].Models) != 2 {
		t.Fatalf("%+v", got)
	}
}
