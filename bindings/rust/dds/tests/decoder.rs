//! The decoder primitives through the safe API on the CPU backend: reveal policies, the canvas
//! and EOS rule, speculative verification, and their argument checks.
mod common;

use common::Rng;
use dds::{request_status, ErrorCode, Logits, RevealArgs, RevealPolicy, Sampler, SamplerConfig,
          VerifyArgs};

#[test]
fn reveal_top_n_threshold_and_mixed_policies() {
    let mut s = Sampler::cpu(10).unwrap();
    // One request, TopN 2: the two best scores; a tie (0.8 at positions 7 and 2) goes to the
    // lower position.
    let scores = [0.5f32, 0.8, 0.9, 0.8, 0.1];
    let positions = [0, 7, 4, 2, 9];
    let mut reveal = [9u8; 5];
    let mut n = [0i32; 1];
    s.reveal(
        RevealArgs::new(&scores, 5)
            .row_offsets(&[0, 5])
            .positions(&positions)
            .count(2)
            .reveal(&mut reveal)
            .num_revealed(&mut n),
    )
    .unwrap();
    assert_eq!(reveal, [0, 0, 1, 1, 0]);
    assert_eq!(n, [2]);

    // Three requests with their own policies: Threshold 0.6 (-> two rows), TopN with
    // steps_left (ceil(3 / 2) = 2), Threshold 0.99 (none above -> the best one), ineligible rows.
    let scores = [0.7f32, 0.65, 0.2, /* r1 */ 0.1, 0.3, 0.2, /* r2 */ 0.4, 0.5];
    let offsets = [0, 3, 6, 8];
    let policies = [RevealPolicy::Threshold.to_raw(), RevealPolicy::TopN.to_raw(), RevealPolicy::Threshold.to_raw()];
    let thresholds = [0.6f32, 0.0, 0.99];
    let counts = [0, 0, 0];
    let steps_left = [1, 2, 1];
    let eligible = [1u8, 1, 1, 1, 1, 1, 1, 0];
    let mut reveal = [0u8; 8];
    let mut n = [0i32; 3];
    let mut st = [0i32; 3];
    s.reveal(
        RevealArgs::new(&scores, 8)
            .row_offsets(&offsets)
            .policies(&policies)
            .thresholds(&thresholds)
            .counts(&counts)
            .steps_left(&steps_left)
            .eligible(&eligible)
            .reveal(&mut reveal)
            .num_revealed(&mut n)
            .request_status(&mut st),
    )
    .unwrap();
    assert_eq!(reveal, [1, 1, 0, 0, 1, 1, 1, 0]);
    assert_eq!(n, [2, 2, 1]);
    assert_eq!(st, [0, 0, 0]);
    // An unknown policy is flagged and TopN used.
    let mut reveal = [0u8; 2];
    let mut st = [0i32; 1];
    s.reveal(
        RevealArgs::new(&[0.1, 0.2], 2)
            .row_offsets(&[0, 2])
            .policies(&[7])
            .reveal(&mut reveal)
            .request_status(&mut st),
    )
    .unwrap();
    assert_eq!((reveal, st), ([0, 1], [request_status::BAD_POLICY]));
}

#[test]
fn reveal_writes_the_canvas_and_applies_the_eos_rule() {
    const MASK: i32 = 99;
    const EOS: i32 = 2;
    let mut s = Sampler::cpu(100).unwrap();
    // Two requests, canvas length 5, stride 6 (padding column untouched).
    let mut canvas = vec![MASK, MASK, MASK, MASK, MASK, -5, /* r1 */ 7, MASK, MASK, MASK, MASK, -5];
    let scores = [0.9f32, 0.8, 0.1, /* r1 */ 0.5, 0.6];
    let positions = [0, 1, 3, /* r1 */ 1, 9]; // position 9 is outside the canvas
    let tokens = [5, EOS, 6, /* r1 */ 8, 4];
    let mut reveal = [0u8; 5];
    let mut finished = [0i32; 2];
    let mut st = [0i32; 2];
    s.reveal(
        RevealArgs::new(&scores, 5)
            .row_offsets(&[0, 3, 5])
            .positions(&positions)
            .tokens(&tokens)
            .count(2)
            .canvas(&mut canvas, 5, 6)
            .mask_token(MASK)
            .eos_token(EOS)
            .reveal(&mut reveal)
            .finished(&mut finished)
            .request_status(&mut st),
    )
    .unwrap();
    assert_eq!(reveal, [1, 1, 0, 1, 0]);
    assert_eq!(&canvas[..6], &[5, EOS, MASK, MASK, MASK, -5]);
    assert_eq!(&canvas[6..], &[7, 8, MASK, MASK, MASK, -5]);
    // Request 0: EOS at 1 and nothing masked before it: finished.
    assert_eq!(finished, [1, 0]);
    assert_eq!(st, [0, request_status::BAD_POSITION]);
}

#[test]
fn reveal_argument_checks() {
    let mut s = Sampler::cpu(10).unwrap();
    let scores = [0.1f32, 0.2, 0.3];
    let mut reveal = [0u8; 3];
    let e = s.reveal(RevealArgs::new(&scores, 3)).unwrap_err();
    assert_eq!(e.code(), ErrorCode::NullPointer);
    assert!(e.message().contains("reveal"), "{}", e);
    let mut short = [0u8; 2];
    let e = s.reveal(RevealArgs::new(&scores, 3).reveal(&mut short)).unwrap_err();
    assert!(e.message().contains("args.reveal has 2 elements but needs at least 3"), "{}", e);
    let mut canvas = [0i32; 9];
    let e = s
        .reveal(
            RevealArgs::new(&scores, 3)
                .row_offsets(&[0, 1, 3])
                .tokens(&[1, 2, 3])
                .canvas(&mut canvas, 5, 0)
                .reveal(&mut reveal),
        )
        .unwrap_err();
    assert!(e.message().contains("args.canvas has 9 elements but needs at least 10"), "{}", e);
    let e = s
        .reveal(RevealArgs::new(&scores, 3).canvas(&mut canvas, 3, 0).reveal(&mut reveal))
        .unwrap_err();
    assert_eq!(e.code(), ErrorCode::NullPointer);
    assert!(e.message().contains("tokens"), "{}", e);
    let e = s.reveal(RevealArgs::new(&scores[..2], 3).reveal(&mut reveal)).unwrap_err();
    assert!(e.message().contains("args.scores has 2 elements"), "{}", e);
}

#[test]
fn verify_greedy_accepts_while_drafts_are_the_argmax() {
    const N: usize = 3;
    let v = 16;
    let n = N;
    let mut rng = Rng(21);
    let target = rng.logits(2 * (n + 1) * v, 2.0);
    let draft_logits = rng.logits(2 * n * v, 2.0);
    let amax = |row: usize| common::argmax(&target[row * v..(row + 1) * v]).unwrap() as i32;
    // Request 0 drafts the target argmax at 0 and 1, then a wrong token; request 1 drafts only 1
    // token (draft_counts), the argmax: all accepted, then the bonus token.
    let wrong = (amax(2) + 1) % v as i32;
    let draft_tokens = [amax(0), amax(1), wrong, amax(n + 1), 0, 0];
    let mut acc = [0i32; 2];
    let mut out = [0i32; 2 * (N + 1)];
    let mut lps = [0f32; 2 * (N + 1)];
    let mut s = Sampler::cpu(v).unwrap();
    s.verify_drafts(
        VerifyArgs::new(Logits::f32(&target), 2, n)
            .draft_logits(Logits::f32(&draft_logits))
            .draft_tokens(&draft_tokens)
            .draft_counts(&[3, 1])
            .temperature(0.0)
            .accepted_counts(&mut acc)
            .out_tokens(&mut out)
            .out_logprobs(&mut lps),
    )
    .unwrap();
    assert_eq!(acc, [2, 1]);
    assert_eq!(&out[..4], &[amax(0), amax(1), amax(2), -1]);
    assert_eq!(&out[4..], &[amax(n + 1), amax(n + 2), -1, -1]);
    assert_eq!(lps[3], f32::NEG_INFINITY);
    assert_eq!(lps[0], 0.0); // greedy: the one-hot target
}

#[test]
fn verify_accepts_drafts_from_the_target_distribution() {
    // q == p: every draft is accepted (u * q < p for u < 1), then a bonus token.
    let v = 40;
    let n = 4;
    let r = 50;
    let row = Rng(22).logits(v, 1.0);
    let target: Vec<f32> = row.iter().cycle().take(r * (n + 1) * v).cloned().collect();
    let draft: Vec<f32> = row.iter().cycle().take(r * n * v).cloned().collect();
    let draft_tokens: Vec<i32> = (0..r * n).map(|i| (i * 7 % v) as i32).collect();
    let seeds: Vec<u64> = (0..r as u64).collect();
    let mut acc = vec![0i32; r];
    let mut out = vec![0i32; r * (n + 1)];
    let mut s = Sampler::new(&SamplerConfig::new(v).max_requests(r)).unwrap();
    s.verify_drafts(
        VerifyArgs::new(Logits::f32(&target), r, n)
            .draft_logits(Logits::f32(&draft))
            .draft_tokens(&draft_tokens)
            .seeds(&seeds)
            .accepted_counts(&mut acc)
            .out_tokens(&mut out),
    )
    .unwrap();
    assert!(acc.iter().all(|&a| a == n as i32), "{:?}", acc);
    for q in 0..r {
        assert_eq!(&out[q * (n + 1)..q * (n + 1) + n], &draft_tokens[q * n..(q + 1) * n]);
        assert!(out[q * (n + 1) + n] >= 0);
    }
}

#[test]
fn verify_argument_checks() {
    let v = 8;
    let mut s = Sampler::cpu(v).unwrap();
    let target = vec![0f32; 2 * 3 * v];
    let draft = vec![0f32; 2 * 2 * v];
    let mut acc = [0i32; 2];
    let mut out = [0i32; 6];
    let e = s
        .verify_drafts(
            VerifyArgs::new(Logits::f32(&target), 2, 2)
                .draft_logits(Logits::f32(&draft))
                .draft_tokens(&[1, 2, 3])
                .accepted_counts(&mut acc)
                .out_tokens(&mut out),
        )
        .unwrap_err();
    assert!(e.message().contains("args.draft_tokens has 3 elements but needs at least 4 (num_requests * num_drafts)"), "{}", e);
    let mut short = [0i32; 5];
    let e = s
        .verify_drafts(
            VerifyArgs::new(Logits::f32(&target), 2, 2)
                .draft_logits(Logits::f32(&draft))
                .draft_tokens(&[1, 2, 3, 4])
                .accepted_counts(&mut acc)
                .out_tokens(&mut short),
        )
        .unwrap_err();
    assert!(e.message().contains("args.out_tokens has 5 elements but needs at least 6"), "{}", e);
    let e = s
        .verify_drafts(
            VerifyArgs::new(Logits::f32(&target[..40]), 2, 2)
                .draft_logits(Logits::f32(&draft))
                .draft_tokens(&[1, 2, 3, 4])
                .accepted_counts(&mut acc)
                .out_tokens(&mut out),
        )
        .unwrap_err();
    assert!(e.message().contains("args.target_logits has 40 elements"), "{}", e);
    let e = s
        .verify_drafts(VerifyArgs::new(Logits::f32(&target), 2, 2).draft_tokens(&[1, 2, 3, 4]).accepted_counts(&mut acc).out_tokens(&mut out))
        .unwrap_err();
    assert_eq!(e.code(), ErrorCode::NullPointer);
    assert!(e.message().contains("draft_logits"), "{}", e);
}
