package stack

import (
	"net"
	"strconv"
	"testing"
)

// TestFreeAddrsAvoidTheEphemeralRange: the ports handed out are free and
// below the range the kernel gives outgoing connections, so a client's
// source port cannot take one before the child process binds it.
func TestFreeAddrsAvoidTheEphemeralRange(t *testing.T) {
	lo := ephemeralLow()
	seen := map[string]bool{}
	// Two batches: a port is never handed out twice, even once the first
	// batch's probes are closed (a child may not have bound it yet).
	for _, addr := range append(MustFreeAddrs(20), MustFreeAddrs(20)...) {
		if seen[addr] {
			t.Fatalf("%s handed out twice", addr)
		}
		seen[addr] = true
		_, p, err := net.SplitHostPort(addr)
		if err != nil {
			t.Fatal(err)
		}
		port, _ := strconv.Atoi(p)
		if port >= lo {
			t.Errorf("%s: port in the ephemeral range (from %d)", addr, lo)
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Errorf("%s not free: %v", addr, err)
			continue
		}
		_ = ln.Close()
	}
}
