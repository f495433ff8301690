//! The decode-loop demo on the CPU backend: a masked-diffusion decoder with a tiny synthetic
//! bigram "model". Each step scores every still-masked position at once (the rows are packed,
//! their canvas positions key the random numbers), samples a token per row with dds
//! (`Sampler::sample`), and commits the positions the model is most confident about
//! (`Sampler::reveal`, which also writes the tokens into the canvas).
//!
//!     DDS_LIB_DIR=/path/to/dds/build LD_LIBRARY_PATH=$DDS_LIB_DIR cargo run --example demo
use dds::{Logits, RevealArgs, RevealPolicy, SampleArgs, Sampler, SamplerConfig, Stats};

const WORDS: [&str; 13] = [
    "the", "cat", "dog", "bird", "sat", "ran", "slept", "on", "under", "mat", "rug", "and", ".",
];
const MASK: usize = WORDS.len(); // the mask token: last id, banned from sampling
const V: usize = WORDS.len() + 1;
const LEN: usize = 14;
const REVEAL_PER_STEP: usize = 2;

/// Bigram plausibility: may `b` follow `a`?
fn follows(a: usize, b: usize) -> bool {
    let (a, b) = (WORDS[a], WORDS[b]);
    match a {
        "the" => matches!(b, "cat" | "dog" | "bird" | "mat" | "rug"),
        "cat" | "dog" | "bird" => matches!(b, "sat" | "ran" | "slept" | "and"),
        "sat" | "ran" | "slept" => matches!(b, "on" | "under" | "."),
        "on" | "under" => b == "the",
        "mat" | "rug" => matches!(b, "and" | "."),
        "and" | "." => b == "the",
        _ => false,
    }
}

/// The "model": logits for canvas position `pos` given the revealed neighbours.
fn score(canvas: &[i32], pos: usize, out: &mut [f32]) {
    let canvas: Vec<usize> = canvas.iter().map(|&t| t as usize).collect();
    for (t, o) in out.iter_mut().enumerate() {
        let mut s = -1.0f32 + 0.1 * (((pos * 31 + t * 17) % 7) as f32); // a little texture
        if t == MASK {
            s = 8.0; // the model likes the mask token; dds bans it
        } else {
            if pos > 0 && canvas[pos - 1] != MASK {
                s += if follows(canvas[pos - 1], t) { 4.0 } else { -3.0 };
            }
            if pos + 1 < LEN && canvas[pos + 1] != MASK {
                s += if follows(t, canvas[pos + 1]) { 4.0 } else { -3.0 };
            }
            if pos == 0 && WORDS[t] == "the" {
                s += 3.0;
            }
            if pos + 1 == LEN {
                s += if WORDS[t] == "." { 6.0 } else { -2.0 };
            }
        }
        *o = s;
    }
}

fn show(step: usize, canvas: &[i32]) {
    let words: Vec<&str> =
        canvas.iter().map(|&t| if t as usize == MASK { "____" } else { WORDS[t as usize] }).collect();
    println!("step {:2}: {}", step, words.join(" "));
}

fn main() -> dds::Result<()> {
    println!("dds {} (CUDA backend built: {})", dds::version_string(), dds::has_cuda());
    let mut sampler = Sampler::new(&SamplerConfig::new(V).max_rows(LEN).max_requests(1))?;
    let mut canvas = vec![MASK as i32; LEN];
    let seed = 2024u64;
    show(0, &canvas);
    let mut step = 0u32;
    while canvas.contains(&(MASK as i32)) {
        step += 1;
        // Pack the masked positions' rows.
        let masked: Vec<usize> = (0..LEN).filter(|&p| canvas[p] == MASK as i32).collect();
        let rows = masked.len();
        let mut logits = vec![0f32; rows * V];
        for (r, &p) in masked.iter().enumerate() {
            score(&canvas, p, &mut logits[r * V..(r + 1) * V]);
        }
        let positions: Vec<i32> = masked.iter().map(|&p| p as i32).collect();
        let offsets = [0, rows as i32];
        let mut tokens = vec![0i32; rows];
        let mut confidence = vec![0f32; rows];
        sampler.sample(
            SampleArgs::new(Logits::f32(&logits), rows)
                .row_offsets(&offsets)
                .positions(&positions)
                .temperature(0.7)
                .top_k(3)
                .seed(seed)
                .step(step)
                .banned_token(MASK as i32)
                .stats(Stats::Guided) // rank positions by the model's own confidence
                .tokens(&mut tokens)
                .confidence(&mut confidence),
        )?;
        assert!(tokens.iter().all(|&t| t as usize != MASK), "the mask token is banned");
        // Commit the most confident positions (ties: lower position): dds writes their tokens
        // into the canvas.
        let mut reveal = vec![0u8; rows];
        sampler.reveal(
            RevealArgs::new(&confidence, rows)
                .row_offsets(&offsets)
                .positions(&positions)
                .policy(RevealPolicy::TopN)
                .count(REVEAL_PER_STEP as i32)
                .tokens(&tokens)
                .canvas(&mut canvas, LEN, LEN)
                .mask_token(MASK as i32)
                .reveal(&mut reveal),
        )?;
        show(step as usize, &canvas);
    }
    println!("done in {} steps", step);
    Ok(())
}
