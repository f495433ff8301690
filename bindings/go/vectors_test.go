package dds_test

// The shared test vectors (tests/vectors/README.md): inputs and the C library's outputs for small
// cases; every binding must reproduce them exactly (tokens, ids, ranks) and to 1e-6 relative
// (values).

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	dds "github.com/dds/dds/bindings/go"
)

// vectorsDir is $DDS_VECTORS_DIR, else tests/vectors of this repository.
func vectorsDir() string {
	if d := os.Getenv("DDS_VECTORS_DIR"); d != "" {
		return d
	}
	return filepath.Join("..", "..", "tests", "vectors")
}

type vcase struct {
	name string
	line int
	keys map[string][]string
	file string
}

// parseVectors reads a vectors file: `case <name>` ... `end` blocks of `key values...` lines.
func parseVectors(path string) ([]*vcase, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<30)
	var cases []*vcase
	var cur *vcase
	ln := 0
	for sc.Scan() {
		ln++
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		key, vals := fields[0], fields[1:]
		switch {
		case key == "case":
			if cur != nil {
				return nil, fmt.Errorf("%s:%d: case %q inside case %q (missing end)", path, ln,
					strings.Join(vals, " "), cur.name)
			}
			cur = &vcase{name: strings.Join(vals, " "), line: ln, keys: map[string][]string{},
				file: filepath.Base(path)}
		case key == "end":
			if cur == nil {
				return nil, fmt.Errorf("%s:%d: end outside a case", path, ln)
			}
			cases = append(cases, cur)
			cur = nil
		case cur == nil:
			return nil, fmt.Errorf("%s:%d: key %q outside a case", path, ln, key)
		default:
			if _, dup := cur.keys[key]; dup {
				return nil, fmt.Errorf("%s:%d: key %q twice in case %q", path, ln, key, cur.name)
			}
			cur.keys[key] = vals
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	if cur != nil {
		return nil, fmt.Errorf("%s: case %q has no end", path, cur.name)
	}
	return cases, nil
}

// vreader converts the values of a case's keys, recording the first error.
type vreader struct {
	c    *vcase
	err  error
	used map[string]bool
}

func (r *vreader) fail(key, format string, a ...interface{}) {
	if r.err == nil {
		r.err = fmt.Errorf("%s case %q (line %d) key %s: %s", r.c.file, r.c.name, r.c.line, key,
			fmt.Sprintf(format, a...))
	}
}

func (r *vreader) has(key string) bool { _, ok := r.c.keys[key]; return ok }

// raw returns the values of key, n of them (a leading count equal to n is accepted and
// dropped); ok = false when the key is absent.
func (r *vreader) raw(key string, n int) ([]string, bool) {
	v, ok := r.c.keys[key]
	r.used[key] = true
	if !ok {
		return nil, false
	}
	if n >= 0 && len(v) == n+1 && v[0] == strconv.Itoa(n) {
		v = v[1:]
	}
	if n >= 0 && len(v) != n {
		r.fail(key, "%d values, want %d", len(v), n)
		return nil, false
	}
	return v, true
}

func (r *vreader) ints(key string, n int) []int32 {
	v, ok := r.raw(key, n)
	if !ok {
		return nil
	}
	out := make([]int32, len(v))
	for i, s := range v {
		x, err := strconv.ParseInt(s, 10, 32)
		if err != nil {
			r.fail(key, "%v", err)
		}
		out[i] = int32(x)
	}
	return out
}

func (r *vreader) u64s(key string, n int) []uint64 {
	v, ok := r.raw(key, n)
	if !ok {
		return nil
	}
	out := make([]uint64, len(v))
	for i, s := range v {
		x, err := strconv.ParseUint(s, 0, 64)
		if err != nil {
			r.fail(key, "%v", err)
		}
		out[i] = x
	}
	return out
}

func (r *vreader) u32s(key string, n int) []uint32 {
	v := r.u64s(key, n)
	if v == nil {
		return nil
	}
	out := make([]uint32, len(v))
	for i, x := range v {
		if x > math.MaxUint32 {
			r.fail(key, "%d is not a u32", x)
		}
		out[i] = uint32(x)
	}
	return out
}

func (r *vreader) floats(key string, n int) []float32 {
	v, ok := r.raw(key, n)
	if !ok {
		return nil
	}
	out := make([]float32, len(v))
	for i, s := range v {
		x, err := strconv.ParseFloat(s, 32)
		if err != nil {
			if ne, isNum := err.(*strconv.NumError); !isNum || ne.Err != strconv.ErrRange {
				r.fail(key, "%v", err)
			}
		}
		out[i] = float32(x)
	}
	return out
}

func (r *vreader) int1(key string, def int) int {
	v, ok := r.raw(key, 1)
	if !ok {
		return def
	}
	x, err := strconv.Atoi(v[0])
	if err != nil {
		r.fail(key, "%v", err)
	}
	return x
}

func (r *vreader) word(key, def string) string {
	v, ok := r.raw(key, 1)
	if !ok {
		return def
	}
	return v[0]
}

func (r *vreader) dtype(key string) dds.DType {
	switch w := r.word(key, "f32"); w {
	case "f32":
		return dds.F32
	case "bf16":
		return dds.BF16
	case "f16":
		return dds.F16
	default:
		r.fail(key, "unknown dtype %q", w)
	}
	return dds.F32
}

// unused lists keys the runner did not read (reported, not fatal: new expectations may appear).
func (r *vreader) unused() []string {
	var out []string
	for k := range r.c.keys {
		if !r.used[k] {
			out = append(out, k)
		}
	}
	return out
}

// setLogits stores float values (already rounded to dt) in the slice field of the dtype.
func toDType(v []float32, dt dds.DType) ([]float32, []uint16) {
	switch dt {
	case dds.BF16:
		return nil, dds.ToBF16(v)
	case dds.F16:
		return nil, dds.ToF16(v)
	}
	return v, nil
}

// eqValue: equal, both NaN, or within 1e-6 relative (1e-12 absolute near 0).
func eqValue(got, want float32) bool {
	if got == want || (got != got && want != want) {
		return true
	}
	if math.IsInf(float64(want), 0) || math.IsInf(float64(got), 0) {
		return false
	}
	return math.Abs(float64(got-want)) <= 1e-6*math.Abs(float64(want))+1e-12
}

type mismatch struct {
	t    *testing.T
	name string
	n    int
}

func (m *mismatch) ints(key string, got, want []int32) {
	if want == nil {
		return
	}
	for i := range want {
		if got[i] != want[i] {
			m.n++
			if m.n <= 10 {
				m.t.Errorf("%s: %s[%d] = %d, C library %d", m.name, key, i, got[i], want[i])
			}
		}
	}
}

func (m *mismatch) floats(key string, got, want []float32) {
	if want == nil {
		return
	}
	for i := range want {
		if !eqValue(got[i], want[i]) {
			m.n++
			if m.n <= 10 {
				m.t.Errorf("%s: %s[%d] = %.9g, C library %.9g", m.name, key, i, got[i], want[i])
			}
		}
	}
}

func loadVectors(t *testing.T, file string) []*vcase {
	path := filepath.Join(vectorsDir(), file)
	if _, err := os.Stat(path); os.IsNotExist(err) {
		t.Skipf("SKIP: %s not found (set DDS_VECTORS_DIR, or generate it with dds_gen_vectors)", path)
	}
	cases, err := parseVectors(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(cases) == 0 {
		t.Fatalf("%s holds no case", path)
	}
	return cases
}

func TestSampleVectors(t *testing.T) {
	cases := loadVectors(t, "sample_vectors.txt")
	total := 0
	for _, c := range cases {
		r := &vreader{c: c, used: map[string]bool{"case": true}}
		v := r.int1("vocab", 0)
		n := r.int1("num_rows", 0)
		nr := r.int1("num_requests", 0)
		a := dds.NewSampleArgs()
		a.NumRows, a.NumRequests = n, nr
		a.DType = r.dtype("dtype")
		a.RowOffsets = r.ints("row_offsets", nr+1)
		a.Positions = r.ints("positions", n)
		a.Temperatures = r.floats("temperatures", nr)
		a.GuidanceScales = r.floats("guidance_scales", nr)
		u := r.int1("uncond_num_rows", 0)
		a.UncondNumRows = u
		a.UncondRowOffsets = r.ints("uncond_row_offsets", nr)
		a.TopKs = r.ints("top_ks", nr)
		a.TopPs = r.floats("top_ps", nr)
		a.MinPs = r.floats("min_ps", nr)
		a.Seeds = r.u64s("seeds", nr)
		a.Steps = r.u32s("steps", nr)
		a.BannedToken = int32(r.int1("banned_token", -1))
		switch w := r.word("stats", "processed"); w {
		case "processed":
			a.Stats = dds.StatsProcessed
		case "guided":
			a.Stats = dds.StatsGuided
		default:
			r.fail("stats", "unknown stats mode %q", w)
		}
		a.Logits, a.Logits16 = toDType(r.floats("logits", n*v), a.DType)
		if r.has("uncond_logits") {
			a.UncondLogits, a.UncondLogits16 = toDType(r.floats("uncond_logits", u*v), a.DType)
		}
		wantTok := r.ints("expect_tokens", n)
		wantArg := r.ints("expect_argmax", n)
		wantLp := r.floats("expect_logprobs", n)
		wantConf := r.floats("expect_confidence", n)
		wantMargin := r.floats("expect_margin", n)
		wantEnt := r.floats("expect_entropy", n)
		wantSt := r.ints("expect_request_status", nr)
		if r.err != nil {
			t.Fatal(r.err)
		}
		if extra := r.unused(); len(extra) > 0 {
			t.Logf("%s: keys not used by the Go runner: %v", c.name, extra)
		}
		o := newOutputs(n, nr, v)
		o.attach(&a)
		a.Probs = nil
		s, err := dds.NewSampler(dds.Config{VocabSize: v, MaxRows: max(n, 1), MaxRequests: max(nr, 1)})
		if err != nil {
			t.Fatalf("%s: NewSampler: %v", c.name, err)
		}
		err = s.Sample(&a)
		s.Close()
		if err != nil {
			t.Errorf("%s: Sample: %v", c.name, err)
			continue
		}
		m := &mismatch{t: t, name: c.name}
		m.ints("tokens", o.tokens, wantTok)
		m.ints("argmax", o.argmax, wantArg)
		m.floats("logprobs", o.logprobs, wantLp)
		m.floats("confidence", o.confidence, wantConf)
		m.floats("margin", o.margin, wantMargin)
		m.floats("entropy", o.entropy, wantEnt)
		m.ints("request_status", o.status, wantSt)
		total += n
	}
	t.Logf("%d sample cases, %d rows checked", len(cases), total)
}

func TestStashVectors(t *testing.T) {
	cases := loadVectors(t, "stash_vectors.txt")
	for _, c := range cases {
		r := &vreader{c: c, used: map[string]bool{"case": true}}
		v := r.int1("vocab", 0)
		n := r.int1("num_rows", 0)
		nr := r.int1("num_requests", 0)
		a := dds.NewStashArgs()
		a.NumRows, a.NumRequests = n, nr
		a.DType = r.dtype("dtype")
		a.RowOffsets = r.ints("row_offsets", nr+1)
		a.Logits, a.Logits16 = toDType(r.floats("logits", n*v), a.DType)
		a.NumTop = r.int1("num_top", a.NumTop)
		if keep := r.ints("keep", nr); keep != nil {
			a.Keep = make([]uint8, nr)
			for i, k := range keep {
				a.Keep[i] = uint8(k)
			}
		}
		a.Slots = r.ints("slots", nr)
		a.NumValid = r.ints("num_valid", nr)
		a.Temperatures = r.floats("temperatures", nr)
		a.CommittedTokens = r.ints("committed_tokens", n)
		a.TokenIDs = r.ints("token_ids", nr*a.NumTop)
		a.NumTokenIDs = r.ints("num_token_ids", nr)
		a.Mode = dds.StashMode(r.int1("logits_mode", 0))
		a.NumSlots = r.int1("num_slots", 0)
		a.RowsPerSlot = r.int1("rows_per_slot", 0)
		poisonID := int32(r.int1("poison_id", -7))
		poisonRank := int32(r.int1("poison_rank", -9))
		poisonValue := float32(12345)
		if pv := r.floats("poison_value", 1); pv != nil {
			poisonValue = pv[0]
		}
		size := a.NumSlots * a.RowsPerSlot * (a.NumTop + 1)
		wantIDs := r.ints("expect_token_ids", size)
		wantLp := r.floats("expect_logprobs", size)
		wantRanks := r.ints("expect_ranks", size)
		if r.err != nil {
			t.Fatal(r.err)
		}
		if extra := r.unused(); len(extra) > 0 {
			t.Logf("%s: keys not used by the Go runner: %v", c.name, extra)
		}
		a.OutTokenIDs, a.OutLogprobs, a.OutRanks = fillI(size, poisonID), fillF(size, poisonValue),
			fillI(size, poisonRank)
		s, err := dds.NewSampler(dds.Config{VocabSize: v, MaxRows: max(n, 1),
			MaxRequests: max(nr, 1), MaxStashWidth: max(a.NumTop, 1)})
		if err != nil {
			t.Fatalf("%s: NewSampler: %v", c.name, err)
		}
		err = s.StashLogprobs(&a)
		s.Close()
		if err != nil {
			t.Errorf("%s: StashLogprobs: %v", c.name, err)
			continue
		}
		m := &mismatch{t: t, name: c.name}
		m.ints("token_ids", a.OutTokenIDs, wantIDs)
		m.floats("logprobs", a.OutLogprobs, wantLp)
		m.ints("ranks", a.OutRanks, wantRanks)
	}
	t.Logf("%d stash cases checked", len(cases))
}

func max(a, b int) int {
	if a > b {
		return a
	}
	return b
}

// The parser on a hand-written file in the documented format.
func TestVectorParser(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sample_vectors.txt")
	text := `# comment
case tiny greedy
vocab 4
num_rows 2
num_requests 1
dtype bf16
row_offsets 0 2
temperatures 0
stats processed
logits 0 0.69140625 1.09375 1.3828125 -inf 1 nan 2
expect_tokens 3 3
expect_argmax 3 3
expect_request_status 0
end
`
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	cases, err := parseVectors(path)
	if err != nil || len(cases) != 1 || cases[0].name != "tiny greedy" {
		t.Fatalf("parse: %v %+v", err, cases)
	}
	r := &vreader{c: cases[0], used: map[string]bool{}}
	lg := r.floats("logits", 8)
	if r.err != nil || !math.IsInf(float64(lg[4]), -1) || lg[6] == lg[6] || lg[1] != 0.69140625 {
		t.Fatalf("floats: %v %v", lg, r.err)
	}
	t.Setenv("DDS_VECTORS_DIR", dir)
	// Runs the case through the library (the vectors runner itself).
	t.Run("run", TestSampleVectors)
	if _, err := parseVectors(writeTemp(t, "case a\nvocab 1\n")); err == nil {
		t.Errorf("missing end accepted")
	}
}

func writeTemp(t *testing.T, s string) string {
	p := filepath.Join(t.TempDir(), "v.txt")
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
