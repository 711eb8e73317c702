package gpusim

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/llm-router/llm-router/scoring/prefix"
)

// MooncakeRow is one request of a Mooncake trace (kvcache-ai/Mooncake,
// FAST'25 release): it has no text, only one hash id per 512-token block of
// its prompt, equal ids marking a shared prefix.
type MooncakeRow struct {
	// Timestamp is the arrival since the start of the trace.
	Timestamp    time.Duration
	InputLength  int // prompt tokens
	OutputLength int // generated tokens
	HashIDs      []int64
}

// MooncakeBlockTokens is the prompt tokens one Mooncake hash id stands for.
const MooncakeBlockTokens = 512

// mooncakeBlockBytes is the text of one hash id: its tokens at gpusim's
// 4 bytes a token.
const mooncakeBlockBytes = MooncakeBlockTokens * prefix.BytesPerToken

// ReadMooncake parses a Mooncake trace: one JSON object a line with
// timestamp (ms), input_length, output_length and hash_ids. Blank lines
// are skipped.
func ReadMooncake(r io.Reader) ([]MooncakeRow, error) {
	var out []MooncakeRow
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	for line := 1; sc.Scan(); line++ {
		b := sc.Bytes()
		if len(strings.TrimSpace(string(b))) == 0 {
			continue
		}
		var in struct {
			Timestamp    *float64 `json:"timestamp"`
			InputLength  int      `json:"input_length"`
			OutputLength int      `json:"output_length"`
			HashIDs      []int64  `json:"hash_ids"`
		}
		if err := json.Unmarshal(b, &in); err != nil {
			return nil, fmt.Errorf("mooncake line %d: %w", line, err)
		}
		if in.Timestamp == nil || *in.Timestamp < 0 || in.InputLength < 1 || in.OutputLength < 0 {
			return nil, fmt.Errorf("mooncake line %d: want timestamp >= 0, input_length >= 1, output_length >= 0", line)
		}
		out = append(out, MooncakeRow{
			Timestamp:   time.Duration(*in.Timestamp * float64(time.Millisecond)),
			InputLength: in.InputLength, OutputLength: in.OutputLength, HashIDs: in.HashIDs,
		})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read mooncake trace: %w", err)
	}
	if len(out) == 0 {
		return nil, errors.New("mooncake trace has no request")
	}
	return out, nil
}

// LoadMooncake is ReadMooncake on a file.
func LoadMooncake(path string) ([]MooncakeRow, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadMooncake(f)
}

// AppendMooncakeBlockText appends the text of hash id to dst: 2048 bytes
// (512 tokens at 4 bytes a token) of lowercase pseudo-random words, each
// followed by one space, drawn by a PCG seeded by id alone, so equal ids
// give equal text and different ids differ within their first words. The
// text is plain ASCII letters and spaces: its JSON
// encoding is itself, quoted.
//
// The first 64 bytes are drawn letter by letter; the rest comes in 64-byte
// phrases picked from a fixed table, so that a replay of a whole trace
// (half a gigabyte of prompts) builds its text at memory speed. The drawn
// head keeps the prefixes of different ids apart: with phrases alone, two
// of the thousands of ids that follow a popular prefix would often start
// alike and share a block they should not.
func AppendMooncakeBlockText(dst []byte, id int64) []byte {
	table := mooncakePhraseTable()
	rng := rand.New(rand.NewPCG(uint64(id), 0x6d6f6f6e63616b65)) // "mooncake"
	dst = appendWords(dst, rng, phraseBytes)
	for k := 1; k < mooncakeBlockBytes/phraseBytes; {
		r := rng.Uint64()
		for j := 0; j < 64/phraseBits && k < mooncakeBlockBytes/phraseBytes; j++ {
			i := int(r>>(j*phraseBits)) & (mooncakePhrases - 1)
			dst = append(dst, table[i*phraseBytes:(i+1)*phraseBytes]...)
			k++
		}
	}
	return dst
}

const (
	phraseBytes     = 64
	phraseBits      = 10
	mooncakePhrases = 1 << phraseBits
)

// mooncakePhraseTable is the phrases, from a fixed seed.
var mooncakePhraseTable = sync.OnceValue(func() []byte {
	rng := rand.New(rand.NewPCG(0x70687261, 0x736573)) // "phrases"
	out := make([]byte, 0, mooncakePhrases*phraseBytes)
	for range mooncakePhrases {
		out = appendWords(out, rng, phraseBytes)
	}
	return out
})

// appendWords appends n bytes of words of 2 to 9 random lowercase letters,
// each followed by a space; the last word is cut to fit (1 to 10 letters).
func appendWords(dst []byte, rng *rand.Rand, n int) []byte {
	for n > 0 {
		w := 2 + rng.IntN(8)
		if n < 12 {
			w = n - 1
		}
		for range w {
			dst = append(dst, byte('a'+rng.IntN(26)))
		}
		dst = append(dst, ' ')
		n -= w + 1
	}
	return dst
}

// Prompt is the prompt text of row: the text of its hash ids in order,
// cut to InputLength tokens (4 bytes each). Rows sharing leading ids share
// leading text. Should the ids be too few for InputLength, the last id's
// text repeats, so the length is always InputLength×4 bytes.
func (row MooncakeRow) Prompt() string {
	return string(appendMooncakePrompt(make([]byte, 0, row.InputLength*prefix.BytesPerToken+mooncakeBlockBytes), row))
}

func appendMooncakePrompt(dst []byte, row MooncakeRow) []byte {
	start := len(dst)
	want := row.InputLength * prefix.BytesPerToken
	for i := 0; len(dst)-start < want; i++ {
		dst = AppendMooncakeBlockText(dst, mooncakeID(row.HashIDs, i))
	}
	return dst[:start+want]
}

// mooncakeID is the id of the i-th 512-token block; past the listed ids it
// repeats the last one (the trace lists ceil(input_length/512) ids, so this
// only pads malformed rows). A row without ids gets the text of id -1.
func mooncakeID(ids []int64, i int) int64 {
	switch {
	case i < len(ids):
		return ids[i]
	case len(ids) > 0:
		return ids[len(ids)-1]
	default:
		return -1
	}
}

// ChatBlockHashes is the block hashes of a chat request whose only message
// is {"role":"user","content":text}, as gpusim's server (and any reader
// following scoring/prefix) computes them from the body: the raw JSON
// "user" then the JSON string of text. text must need no JSON escaping
// (a MooncakeRow's Prompt never does).
func ChatBlockHashes(text string) []uint64 {
	var h prefix.Hasher
	h.WriteString(`"user"`)
	h.WriteString(`"`)
	h.WriteString(text)
	h.WriteString(`"`)
	return h.Blocks()
}

// BlockHashes is ChatBlockHashes(row.Prompt()) without building the
// prompt: the same bytes go to the hasher in the same order, one hash id
// at a time, so a replay of a whole trace never holds a prompt's text.
func (row MooncakeRow) BlockHashes() []uint64 {
	var h prefix.Hasher
	h.WriteString(`"user"`)
	h.WriteString(`"`)
	buf := make([]byte, 0, mooncakeBlockBytes)
	left := row.InputLength * prefix.BytesPerToken
	for i := 0; left > 0; i++ {
		buf = AppendMooncakeBlockText(buf[:0], mooncakeID(row.HashIDs, i))
		n := min(left, len(buf))
		h.Write(buf[:n])
		left -= n
	}
	h.WriteString(`"`)
	return h.Blocks()
}

// SimRequest is row as a request of an offline run, with the block hashes
// of its chat request (BlockHashes). Output lengths below one token are
// raised to one.
func (row MooncakeRow) SimRequest() SimRequest {
	return SimRequest{
		Arrival: row.Timestamp, PromptTokens: row.InputLength, OutputTokens: max(1, row.OutputLength),
		Blocks: row.BlockHashes(),
	}
}
