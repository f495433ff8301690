package dds_test

import (
	"fmt"
	"log"

	dds "github.com/dds/dds/bindings/go"
)

// The README's quick-start: two requests of a 6-token vocabulary, one greedy, one sampled with
// top-k 2, token 5 (the mask token) banned.
func Example() {
	s, err := dds.NewSampler(dds.Config{VocabSize: 6})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	logits := []float32{
		0.1, 2.0, 0.3, 1.5, -1, 9, // row 0 (request 0)
		1.0, 0.2, 3.0, 2.9, 0, 9, // row 1 (request 1)
	}
	tokens := make([]int32, 2)
	conf := make([]float32, 2)

	args := dds.NewSampleArgs() // the library's defaults: T = 1, top-p 1, no ban, ...
	args.NumRows = 2            // one row per request (RowOffsets nil)
	args.Logits = logits
	args.Temperatures = []float32{0, 1} // request 0 greedy
	args.TopK = 2
	args.Seed, args.Step = 42, 0
	args.BannedToken = 5
	args.Stats = dds.StatsGuided
	args.Tokens, args.Confidence = tokens, conf
	if err := s.Sample(&args); err != nil {
		log.Fatal(err) // e.g. "dds: DDS_ERR_INVALID_ARGUMENT: dds_sample: args->row_stride ..."
	}
	fmt.Println(tokens[0], tokens[1] == 2 || tokens[1] == 3)
	fmt.Printf("%.3f\n", conf[0])
	// Output:
	// 1 true
	// 0.503
}
