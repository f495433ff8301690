//! Allowed-token bitmasks and the entropy-bound reveal policy through the safe API on the CPU
//! backend: a masked call equals the call on logits whose disallowed columns are -inf (same
//! random draws), the mask's length check, and the EB rule on hand-made rows.
mod common;

use common::Rng;
use dds::{request_status, Logits, RevealArgs, RevealPolicy, SampleArgs, Sampler, StashArgs,
          VerifyArgs};

fn pack(allowed: &[bool], v: usize, stride: usize) -> Vec<i32> {
    let requests = allowed.len() / v;
    let mut m = vec![0i32; requests * stride];
    for r in 0..requests {
        for t in 0..v {
            if allowed[r * v + t] {
                m[r * stride + t / 32] |= (1u32 << (t % 32)) as i32;
            }
        }
    }
    m
}

#[test]
fn masked_sample_stash_verify_equal_minus_inf() {
    let v = 45;
    let mut rng = Rng(9);
    let x = rng.logits(4 * v, 2.0);
    let allowed: Vec<bool> = (0..2 * v).map(|_| rng.uniform() < 0.5).collect();
    let masks = pack(&allowed, v, 3); // a padded stride: 3 words for 2 needed
    let offsets = [0, 3, 4];
    let mut xm = x.clone();
    for i in 0..4 {
        let r = if i < 3 { 0 } else { 1 };
        for t in 0..v {
            if !allowed[r * v + t] {
                xm[i * v + t] = f32::NEG_INFINITY;
            }
        }
    }
    let mut s = Sampler::cpu(v).unwrap();
    let (mut tok, mut ent, mut tok_ref, mut ent_ref) = ([0i32; 4], [0f32; 4], [0i32; 4], [0f32; 4]);
    s.sample(
        SampleArgs::new(Logits::f32(&x), 4)
            .row_offsets(&offsets)
            .seed(5)
            .temperature(0.8)
            .allowed_token_masks(&masks)
            .allowed_mask_stride(3)
            .tokens(&mut tok)
            .entropy(&mut ent),
    )
    .unwrap();
    s.sample(
        SampleArgs::new(Logits::f32(&xm), 4)
            .row_offsets(&offsets)
            .seed(5)
            .temperature(0.8)
            .tokens(&mut tok_ref)
            .entropy(&mut ent_ref),
    )
    .unwrap();
    assert_eq!(tok, tok_ref);
    assert_eq!(ent, ent_ref);
    for i in 0..4 {
        let r = if i < 3 { 0 } else { 1 };
        assert!(allowed[r * v + tok[i] as usize]);
    }
    // A mask buffer shorter than (num_requests - 1) * stride + ceil(V / 32) is an error naming it.
    let mut tok2 = [0i32; 4];
    let err = s
        .sample(
            SampleArgs::new(Logits::f32(&x), 4)
                .row_offsets(&offsets)
                .allowed_token_masks(&masks[..4])
                .allowed_mask_stride(3)
                .tokens(&mut tok2),
        )
        .unwrap_err();
    assert!(err.to_string().contains("allowed_token_masks"), "{}", err);

    // Stash.
    let (mut ids, mut lps, mut ids_ref, mut lps_ref) =
        (vec![0i32; 2 * 3 * 5], vec![0f32; 2 * 3 * 5], vec![0i32; 2 * 3 * 5], vec![0f32; 2 * 3 * 5]);
    s.stash(
        StashArgs::new(Logits::f32(&x), 4)
            .row_offsets(&offsets)
            .num_top(4)
            .layout(2, 3)
            .allowed_token_masks(&masks)
            .allowed_mask_stride(3)
            .out_token_ids(&mut ids)
            .out_logprobs(&mut lps),
    )
    .unwrap();
    s.stash(
        StashArgs::new(Logits::f32(&xm), 4)
            .row_offsets(&offsets)
            .num_top(4)
            .layout(2, 3)
            .out_token_ids(&mut ids_ref)
            .out_logprobs(&mut lps_ref),
    )
    .unwrap();
    assert_eq!(ids, ids_ref);
    assert_eq!(lps, lps_ref);

    // Verify: request r's mask on its 2 draft rows and 3 target rows.
    let n = 2;
    let target = rng.logits(2 * (n + 1) * v, 1.5);
    let draft = rng.logits(2 * n * v, 1.5);
    let (mut tm, mut dm) = (target.clone(), draft.clone());
    for r in 0..2 {
        for t in 0..v {
            if !allowed[r * v + t] {
                for i in 0..n + 1 {
                    tm[(r * (n + 1) + i) * v + t] = f32::NEG_INFINITY;
                }
                for i in 0..n {
                    dm[(r * n + i) * v + t] = f32::NEG_INFINITY;
                }
            }
        }
    }
    for seed in 0..8u64 {
        let drafts: Vec<i32> = (0..2 * n).map(|_| (rng.next_u64() % v as u64) as i32).collect();
        let (mut acc, mut out, mut acc_ref, mut out_ref) = ([0i32; 2], [0i32; 6], [0i32; 2], [0i32; 6]);
        s.verify_drafts(
            VerifyArgs::new(Logits::f32(&target), 2, n)
                .draft_logits(Logits::f32(&draft))
                .draft_tokens(&drafts)
                .seed(seed)
                .allowed_token_masks(&masks)
                .allowed_mask_stride(3)
                .accepted_counts(&mut acc)
                .out_tokens(&mut out),
        )
        .unwrap();
        s.verify_drafts(
            VerifyArgs::new(Logits::f32(&tm), 2, n)
                .draft_logits(Logits::f32(&dm))
                .draft_tokens(&drafts)
                .seed(seed)
                .accepted_counts(&mut acc_ref)
                .out_tokens(&mut out_ref),
        )
        .unwrap();
        assert_eq!((acc, out), (acc_ref, out_ref));
    }
}

#[test]
fn reveal_entropy_bound() {
    let mut s = Sampler::cpu(8).unwrap();
    // Entropies 0.3 0.1 0.05 0.5 NaN, bound 0.2: 0.05 + 0.1 <= 0.2 < 0.05 + 0.1 + 0.3.
    let ent = [0.3f32, 0.1, 0.05, 0.5, f32::NAN, /* r1 */ 0.25, 0.25, 0.25];
    let mut reveal = [9u8; 8];
    let mut n = [0i32; 2];
    let mut st = [0i32; 2];
    s.reveal(
        RevealArgs::new(&ent, 8)
            .row_offsets(&[0, 5, 8])
            .policy(RevealPolicy::EntropyBound)
            .entropy_bounds(&[0.2, f32::NAN])
            .reveal(&mut reveal)
            .num_revealed(&mut n)
            .request_status(&mut st),
    )
    .unwrap();
    assert_eq!(reveal, [1, 1, 1, 0, 0, 1, 0, 0]);
    assert_eq!(n, [3, 1]);
    assert_eq!(st, [0, request_status::BAD_ENTROPY_BOUND]);
    s.reveal(
        RevealArgs::new(&ent, 8)
            .row_offsets(&[0, 5, 8])
            .policy(RevealPolicy::EntropyBound)
            .entropy_bound(0.5)
            .reveal(&mut reveal),
    )
    .unwrap();
    assert_eq!(reveal, [1, 1, 1, 1, 0, 1, 1, 1]); // 0.05 + 0.1 + 0.3 <= 0.5
    let err = s
        .reveal(RevealArgs::new(&ent, 8).policy(RevealPolicy::EntropyBound).entropy_bound(-1.0).reveal(&mut reveal))
        .unwrap_err();
    assert!(err.to_string().contains("entropy_bound"), "{}", err);
}
