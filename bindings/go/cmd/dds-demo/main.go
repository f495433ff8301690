// Command dds-demo runs a masked-diffusion decode loop with dds on the CPU backend.
//
// The "model" is a tiny synthetic character bigram model built from a sentence: the logits of a
// masked position are log P(x | left neighbour) + log P(right neighbour | x) for the neighbours
// that are already revealed. Every step samples all masked positions in one dds.Sample call
// (rows = masked positions, keyed by their canvas position), then dds.Reveal commits the most
// confident ones into the canvas, and the canvas and the time the step took are printed.
package main

import (
	"flag"
	"fmt"
	"math"
	"os"
	"strings"
	"time"

	dds "github.com/dds/dds/bindings/go"
)

const corpus = "the quick brown fox jumps over the lazy dog. a masked diffusion model reveals " +
	"the most confident tokens first, then fills in the rest. the sampler draws every token " +
	"from its own counter based noise, so the same seed gives the same text. "

const alphabet = "abcdefghijklmnopqrstuvwxyz .,"

func main() {
	length := flag.Int("len", 48, "canvas length")
	perStep := flag.Int("reveal", 1, "positions revealed per step")
	temp := flag.Float64("temp", 0.8, "temperature (0 = greedy)")
	topK := flag.Int("topk", 0, "top-k (0 = off)")
	topP := flag.Float64("topp", 1, "top-p (1 = off)")
	seed := flag.Uint64("seed", 1, "seed")
	flag.Parse()
	if err := run(*length, *perStep, float32(*temp), int32(*topK), float32(*topP), *seed); err != nil {
		fmt.Fprintln(os.Stderr, "dds-demo:", err)
		os.Exit(1)
	}
}

func run(length, perStep int, temp float32, topK int32, topP float32, seed uint64) error {
	if length < 1 || perStep < 1 {
		return fmt.Errorf("-len and -reveal must be >= 1")
	}
	v := len(alphabet) + 1 // + the mask token
	mask := int32(v - 1)
	// Bigram log-probabilities with add-0.1 smoothing: logp[a][b] = log P(b | a).
	logp := make([][]float32, v)
	for a := range logp {
		logp[a] = make([]float32, v)
	}
	counts := make([][]float64, v)
	for a := range counts {
		counts[a] = make([]float64, v)
		for b := 0; b < v-1; b++ {
			counts[a][b] = 0.1
		}
	}
	for i := 0; i+1 < len(corpus); i++ {
		a, b := strings.IndexByte(alphabet, corpus[i]), strings.IndexByte(alphabet, corpus[i+1])
		if a >= 0 && b >= 0 {
			counts[a][b]++
		}
	}
	for a := 0; a < v-1; a++ {
		sum := 0.0
		for b := 0; b < v-1; b++ {
			sum += counts[a][b]
		}
		for b := 0; b < v-1; b++ {
			logp[a][b] = float32(math.Log(counts[a][b] / sum))
		}
	}

	s, err := dds.NewSampler(dds.Config{VocabSize: v, MaxRows: length, MaxRequests: 1})
	if err != nil {
		return err
	}
	defer s.Close()
	fmt.Printf("dds %s (header %d), CPU backend, V=%d, canvas %d, T=%g top-k=%d top-p=%g seed=%d\n",
		dds.VersionString(), dds.HeaderVersionNumber, v, length, temp, topK, topP, seed)

	canvas := make([]int32, length)
	for i := range canvas {
		canvas[i] = mask
	}
	logits := make([]float32, length*v)
	positions := make([]int32, length)
	tokens := make([]int32, length)
	conf := make([]float32, length)
	reveal := make([]uint8, length)
	masked := make([]int, 0, length)
	var total time.Duration
	for step := 0; ; step++ {
		masked = masked[:0]
		for i, t := range canvas {
			if t == mask {
				masked = append(masked, i)
			}
		}
		if len(masked) == 0 {
			break
		}
		t0 := time.Now()
		// The "model": one logits row per masked position.
		for r, i := range masked {
			row := logits[r*v : (r+1)*v]
			for b := range row {
				row[b] = 0
			}
			if i > 0 && canvas[i-1] != mask {
				copy(row, logp[canvas[i-1]])
			}
			if i+1 < length && canvas[i+1] != mask {
				right := canvas[i+1]
				for b := 0; b < v-1; b++ {
					row[b] += logp[b][right]
				}
			}
			positions[r] = int32(i)
		}
		n := len(masked)
		args := dds.NewSampleArgs()
		args.NumRows = n
		args.NumRequests = 1
		args.RowOffsets = []int32{0, int32(n)}
		args.Positions = positions[:n]
		args.Logits = logits[:n*v]
		args.Temperature = temp
		args.TopK = topK
		args.TopP = topP
		args.Seed = seed
		args.Step = uint32(step)
		args.BannedToken = mask
		args.Stats = dds.StatsGuided // rank positions by the model's own confidence
		args.Tokens = tokens[:n]
		args.Confidence = conf[:n]
		if err := s.Sample(&args); err != nil {
			return err
		}
		// Reveal the perStep most confident rows (ties: lower position) and write their tokens
		// into the canvas: dds.Reveal, policy TOP_N.
		rv := dds.NewRevealArgs()
		rv.NumRows = n
		rv.RowOffsets = args.RowOffsets
		rv.Positions = args.Positions
		rv.Scores = conf[:n]
		rv.Tokens = tokens[:n]
		rv.Policy, rv.Count = dds.RevealTopN, int32(perStep)
		rv.Canvas, rv.CanvasLength, rv.MaskToken = canvas, length, mask
		rv.Reveal = reveal[:n]
		if err := s.Reveal(&rv); err != nil {
			return err
		}
		dt := time.Since(t0)
		total += dt
		fmt.Printf("step %3d  %s  %8.1f us\n", step, render(canvas, mask), float64(dt.Nanoseconds())/1e3)
	}
	fmt.Printf("done: %q in %v\n", render(canvas, mask), total)
	return nil
}

func render(canvas []int32, mask int32) string {
	var b strings.Builder
	for _, t := range canvas {
		if t == mask {
			b.WriteByte('_')
		} else {
			b.WriteByte(alphabet[t])
		}
	}
	return b.String()
}
