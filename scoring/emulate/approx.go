package emulate

// Defaults of llm-d's approximate prefix producer
// (approx-prefix-cache-producer), the index behind its prefix-cache scorer
// and its prefix-affinity filter when no engine publishes KV events.
const (
	// approxBlockTokens is the block the index hashes: blockSizeTokens
	// defaults to 16 but has been clamped to at least 64 at request time
	// since June 2026, so 64 in every default deployment.
	approxBlockTokens = 64
	// approxStride is the 16-token hashes of scoring/prefix in one
	// 64-token block.
	approxStride = approxBlockTokens / blockTokens
	// approxMaxBlocks is maxPrefixTokensToMatch (131,072) in blocks:
	// only a prompt's first 2,048 blocks are indexed and matched.
	approxMaxBlocks = 131072 / approxBlockTokens
	// approxLRUCapacity is lruCapacityPerServer, the blocks remembered per
	// server when autoTune has no engine figure to size it from.
	approxLRUCapacity = 31250
)

// approxBlocks are a prompt's chained 64-token block hashes, at most
// approxMaxBlocks of them. A chained 16-token hash identifies the whole
// prompt up to its block's end, so every fourth one (the last of each
// 64-token block) identifies the prompt up to a 64-token boundary exactly
// as a chained 64-token hash would: two prompts share their first k of
// these iff they share their first 64·k tokens (as estimated). A prompt's
// trailing partial 64-token block is not hashed, as upstream's is not.
func approxBlocks(blocks []uint64) []uint64 {
	n := min(len(blocks)/approxStride, approxMaxBlocks)
	out := make([]uint64, n)
	for i := range out {
		out[i] = blocks[(i+1)*approxStride-1]
	}
	return out
}

// approxIndex is one router replica's approximate prefix index: per
// server, an LRU of the 64-token blocks this replica routed there,
// recorded when the pick is made (upstream's PreRequest), never told what
// the engine really cached or evicted, nor what other replicas routed. It
// is not safe for concurrent use; its owner locks.
type approxIndex struct {
	servers  map[string]*blockLRU
	capacity map[string]int // autoTune: the server's KV in 64-token blocks
}

func newApproxIndex() *approxIndex {
	return &approxIndex{servers: map[string]*blockLRU{}, capacity: map[string]int{}}
}

// tune records a server's LRU capacity as upstream's autoTune derives it
// from the engine's reported KV size (kvBlocks of scoring/prefix's 16
// tokens); unknown sizes keep lruCapacityPerServer.
func (x *approxIndex) tune(server string, kvBlocks int) {
	if kvBlocks > 0 {
		x.capacity[server] = max(1, kvBlocks/approxStride)
	}
}

// match counts, per server, the blocks it holds among the request's
// leading blocks that some server holds: the walk stops at the first
// block no server holds (upstream's matchLongestPrefix), and a server
// missing a block before that still gets credit for the later ones it
// holds.
func (x *approxIndex) match(blocks []uint64) map[string]int {
	matched := make(map[string]int, len(x.servers))
	for _, b := range blocks {
		found := false
		for id, l := range x.servers {
			if l.has(b) {
				matched[id]++
				found = true
			}
		}
		if !found {
			break
		}
	}
	return matched
}

// add records blocks as routed to server.
func (x *approxIndex) add(server string, blocks []uint64) {
	if len(blocks) == 0 {
		return
	}
	l := x.servers[server]
	if l == nil {
		c, ok := x.capacity[server]
		if !ok {
			c = approxLRUCapacity
		}
		l = newBlockLRU(c)
		x.servers[server] = l
	}
	for _, b := range blocks {
		l.add(b)
	}
}
