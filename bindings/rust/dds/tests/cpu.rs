//! The scenarios of the C library's CPU tests, through the safe Rust API on the CPU backend:
//! greedy, filters (top-k, top-p, min-p, mixed per request), guidance in a mixed batch, batch
//! invariance and positions, ban and -inf columns, logits and probs dtypes, request status,
//! statistics, sampling frequencies, and the stash.
mod common;

use common::{argmax, assert_close, keep_set, softmax, softmax_over, temper, Rng};
use dds::{half, request_status, Dtype, Logits, ProbsOut, SampleArgs, Sampler, SamplerConfig,
          StashArgs, StashMode, Stats};

fn sampler(v: usize) -> Sampler {
    Sampler::new(&SamplerConfig::new(v).max_rows(8192).max_requests(8192).max_stash_width(64))
        .expect("create a CPU sampler")
}

/// `n` requests of one row each, all the same `row`, with seeds 0..n: `n` independent draws.
fn draws(s: &mut Sampler, row: &[f32], n: usize, f: impl Fn(SampleArgs) -> SampleArgs) -> Vec<i32> {
    let v = row.len();
    let logits: Vec<f32> = row.iter().cycle().take(n * v).cloned().collect();
    let seeds: Vec<u64> = (0..n as u64).map(|i| i * 7919 + 1).collect();
    let mut tokens = vec![-1i32; n];
    s.sample(f(SampleArgs::new(Logits::f32(&logits), n).seeds(&seeds).tokens(&mut tokens)))
        .unwrap();
    tokens
}

#[test]
fn version_and_build() {
    let (major, minor, patch) = dds::version();
    assert_eq!(major, dds::sys::DDS_VERSION_MAJOR);
    assert_eq!(format!("{}.{}.{}", major, minor, patch), dds::version_string());
    dds::check_version().unwrap();
    let s = Sampler::cpu(10).unwrap();
    assert_eq!(s.backend(), dds::Backend::Cpu);
    let mut b = 0i32;
    assert_eq!(unsafe { dds::sys::dds_sampler_backend(s.as_raw(), &mut b) }, dds::sys::dds_status::DDS_OK);
    assert_eq!(b, 0);
    assert_eq!(s.vocab_size(), 10);
}

#[test]
fn greedy_takes_the_argmax_with_lower_id_ties() {
    let v = 37;
    let mut rng = Rng(1);
    let mut logits = rng.logits(5 * v, 3.0);
    logits[2 * v + 11] = 50.0; // row 2: a tie at 11 and 29 -> 11
    logits[2 * v + 29] = 50.0;
    let mut s = sampler(v);
    let (mut tokens, mut argmax_out, mut lp, mut conf, mut margin, mut ent) =
        (vec![0i32; 5], vec![0i32; 5], vec![9f32; 5], vec![9f32; 5], vec![9f32; 5], vec![9f32; 5]);
    s.sample(
        SampleArgs::new(Logits::f32(&logits), 5)
            .temperature(0.0)
            .seed(123)
            .tokens(&mut tokens)
            .argmax(&mut argmax_out)
            .logprobs(&mut lp)
            .confidence(&mut conf)
            .margin(&mut margin)
            .entropy(&mut ent),
    )
    .unwrap();
    for i in 0..5 {
        let want = argmax(&logits[i * v..(i + 1) * v]).unwrap() as i32;
        assert_eq!(tokens[i], want, "row {}", i);
        assert_eq!(argmax_out[i], want);
        // Processed statistics of greedy decoding: the one-hot distribution.
        assert_eq!((lp[i], conf[i], margin[i], ent[i]), (0.0, 1.0, 1.0, 0.0));
    }
    assert_eq!(tokens[2], 11);

    // Guided statistics under greedy: softmax of the logits, margin 0 for the tie.
    let mut conf = vec![0f32; 5];
    let mut margin = vec![0f32; 5];
    s.sample(
        SampleArgs::new(Logits::f32(&logits), 5)
            .temperature(0.0)
            .stats(Stats::Guided)
            .confidence(&mut conf)
            .margin(&mut margin),
    )
    .unwrap();
    for i in 0..5 {
        let p = softmax(&logits[i * v..(i + 1) * v]);
        let p1 = p.iter().cloned().fold(0.0, f64::max);
        assert_close("confidence", conf[i] as f64, p1, 1e-5, 1e-7);
    }
    assert_eq!(margin[2], 0.0);
}

#[test]
fn top_k_keeps_the_k_best() {
    let v = 50;
    let row = Rng(2).logits(v, 1.0);
    let mut s = sampler(v);
    let keep = keep_set(&row, 5, 1.0, 0.0);
    let toks = draws(&mut s, &row, 2000, |a| a.top_k(5));
    let mut seen = std::collections::BTreeSet::new();
    for t in &toks {
        assert!(keep[*t as usize], "token {} outside the top-5", t);
        seen.insert(*t);
    }
    assert_eq!(seen.len(), 5, "2000 draws from 5 tokens of similar mass hit all of them");
    // top-k 1 is the argmax.
    let toks = draws(&mut s, &row, 50, |a| a.top_k(1));
    assert!(toks.iter().all(|&t| t as usize == argmax(&row).unwrap()));
}

#[test]
fn top_p_and_min_p_keep_the_documented_sets() {
    let v = 64;
    let row = Rng(3).logits(v, 2.0);
    let mut s = sampler(v);
    for &(t, p, mp) in &[(1.0f32, 0.5f32, 0.0f32), (0.7, 1.0, 0.1), (1.3, 0.8, 0.05), (1.0, 0.0, 0.0)] {
        let keep = keep_set(&temper(&row, t), 0, p, mp);
        let toks = draws(&mut s, &row, 1500, |a| a.temperature(t).top_p(p).min_p(mp));
        for tok in &toks {
            assert!(keep[*tok as usize], "T {} p {} min_p {}: token {} not kept", t, p, mp, tok);
        }
        let kept = keep.iter().filter(|&&k| k).count();
        let hit: std::collections::BTreeSet<_> = toks.iter().collect();
        assert!(hit.len() >= kept.min(3), "T {} p {} min_p {}: only {} distinct", t, p, mp, hit.len());
    }
}

#[test]
fn mixed_filters_per_request() {
    // Four kinds of requests in one call, each with its own temperature / k / p / min-p.
    let v = 40;
    let row = Rng(4).logits(v, 1.5);
    let kinds: [(f32, i32, f32, f32); 4] = [(1.0, 3, 1.0, 0.0), (0.8, 0, 0.6, 0.0), (1.2, 10, 0.9, 0.2), (0.0, 0, 1.0, 0.0)];
    let per_kind = 300;
    let n = kinds.len() * per_kind;
    let logits: Vec<f32> = row.iter().cycle().take(n * v).cloned().collect();
    let temps: Vec<f32> = (0..n).map(|i| kinds[i / per_kind].0).collect();
    let ks: Vec<i32> = (0..n).map(|i| kinds[i / per_kind].1).collect();
    let ps: Vec<f32> = (0..n).map(|i| kinds[i / per_kind].2).collect();
    let mps: Vec<f32> = (0..n).map(|i| kinds[i / per_kind].3).collect();
    let seeds: Vec<u64> = (0..n as u64).collect();
    let mut tokens = vec![0i32; n];
    let mut status = vec![-1i32; n];
    let mut s = sampler(v);
    s.sample(
        SampleArgs::new(Logits::f32(&logits), n)
            .temperatures(&temps)
            .top_ks(&ks)
            .top_ps(&ps)
            .min_ps(&mps)
            .seeds(&seeds)
            .tokens(&mut tokens)
            .request_status(&mut status),
    )
    .unwrap();
    assert!(status.iter().all(|&x| x == 0));
    for (kind, &(t, k, p, mp)) in kinds.iter().enumerate() {
        let keep = if t == 0.0 {
            let mut k = vec![false; v];
            k[argmax(&row).unwrap()] = true;
            k
        } else {
            keep_set(&temper(&row, t), k as usize, p, mp)
        };
        for i in kind * per_kind..(kind + 1) * per_kind {
            assert!(keep[tokens[i] as usize], "kind {}: token {} not kept", kind, tokens[i]);
        }
    }
}

#[test]
fn statistics_match_the_reference() {
    let v = 300;
    let rows = 4;
    let logits = Rng(5).logits(rows * v, 2.0);
    let (t, k, p) = (0.8f32, 40, 0.9f32);
    let mut s = sampler(v);
    for stats in [Stats::Processed, Stats::Guided] {
        let mut tokens = vec![0i32; rows];
        let (mut lp, mut conf, mut margin, mut ent) = (vec![0f32; rows], vec![0f32; rows], vec![0f32; rows], vec![0f32; rows]);
        let mut probs = vec![0f32; rows * v];
        s.sample(
            SampleArgs::new(Logits::f32(&logits), rows)
                .temperature(t)
                .top_k(k)
                .top_p(p)
                .seed(99)
                .stats(stats)
                .tokens(&mut tokens)
                .logprobs(&mut lp)
                .confidence(&mut conf)
                .margin(&mut margin)
                .entropy(&mut ent)
                .probs(ProbsOut::f32(&mut probs)),
        )
        .unwrap();
        for i in 0..rows {
            let l = &logits[i * v..(i + 1) * v];
            let a = temper(l, t);
            let keep = keep_set(&a, k as usize, p, 0.0);
            assert!(keep[tokens[i] as usize]);
            let want = match stats {
                Stats::Processed => softmax_over(&a, &keep),
                Stats::Guided => softmax(l),
            };
            for tok in 0..v {
                assert_close("probs", probs[i * v + tok] as f64, want[tok], 1e-5, 1e-7);
            }
            let mut sorted = want.clone();
            sorted.sort_by(|x, y| y.partial_cmp(x).unwrap());
            assert_close("logprob", lp[i] as f64, want[tokens[i] as usize].ln(), 1e-5, 1e-6);
            assert_close("confidence", conf[i] as f64, sorted[0], 1e-5, 1e-7);
            assert_close("margin", margin[i] as f64, sorted[0] - sorted[1], 1e-5, 1e-6);
            let h: f64 = want.iter().filter(|&&q| q > 0.0).map(|&q| -q * q.ln()).sum();
            assert_close("entropy", ent[i] as f64, h, 1e-5, 1e-6);
        }
    }
}

#[test]
fn guidance_mixed_batch_and_batch_invariance() {
    // Request 0: 2 rows guided (g = 1.5, uncond rows 0-1); request 1: 1 row, not guided (-1);
    // request 2: 2 rows guided (g = 0.5, uncond rows 2-3).
    let v = 90;
    let mut rng = Rng(6);
    let cond = rng.logits(5 * v, 2.0);
    let uncond = rng.logits(4 * v, 2.0);
    let offsets = [0, 2, 3, 5];
    let uoffs = [0, -1, 2];
    let scales = [1.5f32, 3.0, 0.5];
    let seeds = [11u64, 12, 13];
    let mut s = sampler(v);
    let mut probs = vec![0f32; 5 * v];
    let mut tokens = vec![0i32; 5];
    let mut status = vec![0i32; 3];
    s.sample(
        SampleArgs::new(Logits::f32(&cond), 5)
            .row_offsets(&offsets)
            .uncond_logits(Logits::f32(&uncond))
            .uncond_row_offsets(&uoffs)
            .guidance_scales(&scales)
            .seeds(&seeds)
            .stats(Stats::Guided)
            .tokens(&mut tokens)
            .probs(ProbsOut::f32(&mut probs))
            .request_status(&mut status),
    )
    .unwrap();
    assert_eq!(status, [0, 0, 0]);
    let guided = |row: usize, urow: usize, g: f32| -> Vec<f32> {
        (0..v).map(|t| {
            let (c, u) = (cond[row * v + t], uncond[urow * v + t]);
            g.mul_add(c - u, c)
        }).collect()
    };
    let expect: Vec<Vec<f32>> = vec![
        guided(0, 0, 1.5),
        guided(1, 1, 1.5),
        cond[2 * v..3 * v].to_vec(),
        guided(3, 2, 0.5),
        guided(4, 3, 0.5),
    ];
    for (row, l) in expect.iter().enumerate() {
        let want = softmax(l);
        for t in 0..v {
            assert_close("guided probs", probs[row * v + t] as f64, want[t], 1e-5, 1e-7);
        }
    }
    // Request 2 alone (its rows, its uncond rows, its seed) samples the same tokens.
    let mut alone = vec![0i32; 2];
    s.sample(
        SampleArgs::new(Logits::f32(&cond[3 * v..5 * v]), 2)
            .row_offsets(&[0, 2])
            .uncond_logits(Logits::f32(&uncond[2 * v..4 * v]))
            .guidance_scale(0.5)
            .seed(13)
            .tokens(&mut alone),
    )
    .unwrap();
    assert_eq!(alone, tokens[3..5]);
    // Request 1 alone, without guidance.
    let mut alone = vec![0i32; 1];
    s.sample(SampleArgs::new(Logits::f32(&cond[2 * v..3 * v]), 1).seed(12).tokens(&mut alone))
        .unwrap();
    assert_eq!(alone[0], tokens[2]);
}

#[test]
fn positions_key_the_noise() {
    // A canvas of 8 positions: sampling only the masked ones (with their positions) draws the
    // same tokens as sampling the whole canvas.
    let v = 1500; // two 1024-blocks
    let logits = Rng(7).logits(8 * v, 1.0);
    let mut s = sampler(v);
    let mut full = vec![0i32; 8];
    s.sample(SampleArgs::new(Logits::f32(&logits), 8).row_offsets(&[0, 8]).seed(5).step(3).tokens(&mut full))
        .unwrap();
    let masked = [1usize, 4, 6];
    let packed: Vec<f32> = masked.iter().flat_map(|&p| logits[p * v..(p + 1) * v].to_vec()).collect();
    let positions: Vec<i32> = masked.iter().map(|&p| p as i32).collect();
    let mut part = vec![0i32; 3];
    s.sample(
        SampleArgs::new(Logits::f32(&packed), 3)
            .row_offsets(&[0, 3])
            .positions(&positions)
            .seed(5)
            .step(3)
            .tokens(&mut part),
    )
    .unwrap();
    for (k, &p) in masked.iter().enumerate() {
        assert_eq!(part[k], full[p]);
    }
    // Another step draws other numbers somewhere.
    let mut other = vec![0i32; 8];
    s.sample(SampleArgs::new(Logits::f32(&logits), 8).row_offsets(&[0, 8]).seed(5).step(4).tokens(&mut other))
        .unwrap();
    assert_ne!(other, full);
}

#[test]
fn banned_and_minus_inf_columns_are_never_sampled() {
    let v = 20;
    let mut row = Rng(8).logits(v, 0.5);
    row[7] = 30.0; // banned, and by far the best
    row[3] = f32::NEG_INFINITY;
    row[12] = f32::NAN; // NaN -> -inf
    let mut s = sampler(v);
    let toks = draws(&mut s, &row, 3000, |a| a.banned_token(7));
    assert!(toks.iter().all(|&t| t != 7 && t != 3 && t != 12));
    // A row with nothing finite: token 0 and the EMPTY_ROW flag.
    let empty = vec![f32::NEG_INFINITY; v];
    let mut tok = [5i32];
    let mut lp = [0f32];
    let mut st = [0i32];
    s.sample(SampleArgs::new(Logits::f32(&empty), 1).tokens(&mut tok).logprobs(&mut lp).request_status(&mut st))
        .unwrap();
    assert_eq!(tok[0], 0);
    assert_eq!(lp[0], f32::NEG_INFINITY);
    assert_eq!(st[0], request_status::EMPTY_ROW);
}

#[test]
fn bad_per_request_values_are_sanitised_and_flagged() {
    let v = 16;
    let logits = Rng(9).logits(4 * v, 1.0);
    let temps = [f32::NAN, 1.0, 1.0, -1.0];
    let ks = [0, -3, 0, 0];
    let ps = [1.0, 1.0, f32::NAN, 1.0];
    let mps = [0.0, 0.0, 0.0, -0.5];
    let mut st = [0i32; 4];
    let mut tok = [0i32; 4];
    let mut s = sampler(v);
    s.sample(
        SampleArgs::new(Logits::f32(&logits), 4)
            .temperatures(&temps)
            .top_ks(&ks)
            .top_ps(&ps)
            .min_ps(&mps)
            .tokens(&mut tok)
            .request_status(&mut st),
    )
    .unwrap();
    assert_eq!(st[0], request_status::BAD_TEMPERATURE);
    assert_eq!(st[1], request_status::BAD_TOP_K);
    assert_eq!(st[2], request_status::BAD_TOP_P);
    assert_eq!(st[3], request_status::BAD_TEMPERATURE | request_status::BAD_MIN_P);
}

#[test]
fn logits_dtypes_give_the_same_tokens() {
    let v = 2100;
    let rows = 6;
    let raw = Rng(10).logits(rows * v, 3.0);
    let mut s = sampler(v);
    for dtype in [Dtype::Bf16, Dtype::F16] {
        let bits = match dtype {
            Dtype::Bf16 => half::to_bf16(&raw),
            _ => half::to_f16(&raw),
        };
        let rounded: Vec<f32> = bits
            .iter()
            .map(|&b| if dtype == Dtype::Bf16 { half::bf16_to_f32(b) } else { half::f16_to_f32(b) })
            .collect();
        let run = |s: &mut Sampler, logits: Logits| {
            let (mut t, mut e) = (vec![0i32; rows], vec![0f32; rows]);
            s.sample(SampleArgs::new(logits, rows).temperature(0.9).top_p(0.95).seed(77).tokens(&mut t).entropy(&mut e))
                .unwrap();
            (t, e)
        };
        let from_half = run(&mut s, Logits::half(&bits, dtype));
        let from_f32 = run(&mut s, Logits::f32(&rounded));
        assert_eq!(from_half, from_f32, "{:?}", dtype);
    }
}

#[test]
fn probs_dtypes_and_row_stride() {
    let v = 33;
    let rows = 3;
    let stride = 40; // 7 padding elements per row, never written
    let logits = Rng(11).logits(rows * v, 2.0);
    let mut s = sampler(v);
    let mut p32 = vec![-1f32; (rows - 1) * stride + v];
    s.sample(
        SampleArgs::new(Logits::f32(&logits), rows)
            .temperature(0.7)
            .probs(ProbsOut::f32(&mut p32))
            .probs_row_stride(stride),
    )
    .unwrap();
    for r in 0..rows {
        let sum: f64 = p32[r * stride..r * stride + v].iter().map(|&x| x as f64).sum();
        assert_close("row sum", sum, 1.0, 1e-5, 0.0);
        if r + 1 < rows {
            assert!(p32[r * stride + v..(r + 1) * stride].iter().all(|&x| x == -1.0), "padding written");
        }
    }
    for dtype in [Dtype::Bf16, Dtype::F16] {
        let mut p16 = vec![0xdeadu16; (rows - 1) * stride + v];
        s.sample(
            SampleArgs::new(Logits::f32(&logits), rows)
                .temperature(0.7)
                .probs(ProbsOut::half(&mut p16, dtype))
                .probs_row_stride(stride),
        )
        .unwrap();
        for r in 0..rows {
            for t in 0..v {
                let want = match dtype {
                    Dtype::Bf16 => half::f32_to_bf16(p32[r * stride + t]),
                    _ => half::f32_to_f16(p32[r * stride + t]),
                };
                assert_eq!(p16[r * stride + t], want, "{:?} row {} col {}", dtype, r, t);
            }
            if r + 1 < rows {
                assert!(p16[r * stride + v..(r + 1) * stride].iter().all(|&x| x == 0xdead));
            }
        }
    }
}

#[test]
fn sampling_frequencies_follow_the_distribution() {
    // Chi-square of 40000 draws against softmax(l / T): deterministic seeds, cannot flake.
    let row = [0.0f32, 1.0, 2.0, 0.5, -1.0, 1.5];
    let t = 0.9f32;
    let want = softmax(&temper(&row, t));
    let mut s = sampler(row.len());
    let mut counts = [0usize; 6];
    let n = 8000;
    for call in 0..5u32 {
        for tok in draws(&mut s, &row, n, |a| a.temperature(t).step(call)) {
            counts[tok as usize] += 1;
        }
    }
    let total = (5 * n) as f64;
    let chi2: f64 = counts.iter().zip(&want).map(|(&c, &p)| (c as f64 - total * p).powi(2) / (total * p)).sum();
    // 5 degrees of freedom: P(chi2 > 20.5) = 0.001.
    assert!(chi2 < 20.5, "chi-square {} too large: counts {:?}", chi2, counts);
}

#[test]
fn stash_top_n_ranks_slots_and_keep() {
    let v = 30;
    let n_top = 4;
    let e = n_top + 1;
    let mut rng = Rng(12);
    let mut logits = rng.logits(5 * v, 2.0);
    logits[4 * v + 9] = f32::NEG_INFINITY;
    // Requests: 0 (rows 0-1) kept, slot 1; 1 (row 2) not kept; 2 (rows 3-4) kept, slot 0, own ids,
    // one valid row.
    let offsets = [0, 2, 3, 5];
    let keep = [1u8, 0, 1];
    let slots = [1, 2, 0];
    let num_valid = [2, 1, 1];
    let temps = [1.0f32, 1.0, 0.5];
    let token_ids = [0, 0, 0, 0, 0, 0, 0, 0, 5, 9, 29, 0];
    let num_token_ids = [0, 0, 3];
    let committed = [-1, 3, 3, 17, 17]; // row 0: out of range -> written as given, -inf, rank 0
    let (num_slots, rows_per_slot) = (3, 2);
    let total = num_slots * rows_per_slot * e;
    let mut ids = vec![-7i32; total];
    let mut lps = vec![12345f32; total];
    let mut ranks = vec![-9i32; total];
    let mut st = vec![-1i32; 3];
    let mut s = sampler(v);
    s.stash(
        StashArgs::new(Logits::f32(&logits), 5)
            .row_offsets(&offsets)
            .keep(&keep)
            .slots(&slots)
            .num_valid(&num_valid)
            .temperatures(&temps)
            .committed_tokens(&committed)
            .token_ids(&token_ids)
            .num_token_ids(&num_token_ids)
            .num_top(n_top)
            .layout(num_slots, rows_per_slot)
            .out_token_ids(&mut ids)
            .out_logprobs(&mut lps)
            .out_ranks(&mut ranks)
            .request_status(&mut st),
    )
    .unwrap();
    let at = |slot: usize, j: usize, k: usize| (slot * rows_per_slot + j) * e + k;
    let reference = |row: usize, t: f32| -> (Vec<f32>, Vec<f64>, Vec<usize>) {
        let x = temper(&logits[row * v..(row + 1) * v], t);
        let p = softmax(&x);
        let mut order: Vec<usize> = (0..v).filter(|&i| x[i] > f32::NEG_INFINITY).collect();
        order.sort_by(|&a, &b| x[b].partial_cmp(&x[a]).unwrap().then(a.cmp(&b)));
        (x, p, order)
    };
    let rank = |x: &[f32], tok: usize| 1 + x.iter().filter(|&&y| y > x[tok]).count() as i32;
    // Request 0 -> slot 1, rows 0 and 1: entry 0 committed, entries 1..4 the top 4.
    for j in 0..2 {
        let (x, p, order) = reference(j, 1.0);
        let c = committed[j];
        assert_eq!(ids[at(1, j, 0)], c);
        if c < 0 {
            assert_eq!((lps[at(1, j, 0)], ranks[at(1, j, 0)]), (f32::NEG_INFINITY, 0));
        } else {
            assert_close("entry 0", lps[at(1, j, 0)] as f64, p[c as usize].ln(), 1e-5, 1e-6);
            assert_eq!(ranks[at(1, j, 0)], rank(&x, c as usize));
        }
        for k in 1..e {
            let tok = order[k - 1];
            assert_eq!(ids[at(1, j, k)], tok as i32);
            assert_close("top", lps[at(1, j, k)] as f64, p[tok].ln(), 1e-5, 1e-6);
            assert_eq!(ranks[at(1, j, k)], k as i32);
        }
    }
    // Request 2 -> slot 0, one valid row (row 3), own ids 5, 9, 29, then padding.
    let (x, p, _) = reference(3, 0.5);
    assert_eq!(ids[at(0, 0, 0)], 17);
    for (k, &tok) in [5usize, 9, 29].iter().enumerate() {
        assert_eq!(ids[at(0, 0, k + 1)], tok as i32);
        assert_close("own id", lps[at(0, 0, k + 1)] as f64, p[tok].ln(), 1e-5, 1e-6);
        assert_eq!(ranks[at(0, 0, k + 1)], rank(&x, tok));
    }
    assert_eq!((ids[at(0, 0, 4)], lps[at(0, 0, 4)], ranks[at(0, 0, 4)]), (0, f32::NEG_INFINITY, 0));
    // Untouched: slot 0 row 1 (num_valid 1) and slot 2 (request 1 not kept).
    for k in 0..e {
        for &(slot, j) in &[(0, 1), (2, 0), (2, 1)] {
            assert_eq!((ids[at(slot, j, k)], lps[at(slot, j, k)], ranks[at(slot, j, k)]), (-7, 12345.0, -9));
        }
    }
    // request_status is written for every request, kept or not: request 0's committed token -1 is
    // outside [0, V) (DDS_REQ_BAD_TOKEN_ID), the others are good.
    assert_eq!(st, [request_status::BAD_TOKEN_ID, 0, 0]);

    // Tempered-logits mode writes l / T.
    let mut vals = vec![0f32; 2 * e];
    s.stash(
        StashArgs::new(Logits::f32(&logits[..2 * v]), 2)
            .row_offsets(&[0, 2])
            .temperature(2.0)
            .num_top(n_top)
            .mode(StashMode::TemperedLogits)
            .layout(1, 2)
            .out_logprobs(&mut vals),
    )
    .unwrap();
    let (x, _, order) = reference(0, 2.0);
    assert_eq!(vals[0], x[argmax(&logits[..v]).unwrap()]);
    for k in 1..e {
        assert_eq!(vals[k], x[order[k - 1]]);
    }
}

#[test]
fn pinned_tokens_of_the_c_tests() {
    // tests/cpu/test_rng.cpp "pinned sampled tokens": 16 positions of one request.
    let row = |v: usize| -> Vec<f32> {
        if v == 8 {
            vec![0.5, -1.0, 2.0, 0.0, 1.5, -0.25, 1.0, 0.75]
        } else {
            (0..v).map(|t| (2.0 * (t as f64 * 0.37).sin() - t as f64 * 0.001) as f32).collect()
        }
    };
    let pinned = |v: usize, seed: u64, step: u32| -> Vec<i32> {
        let r = row(v);
        let logits: Vec<f32> = r.iter().cycle().take(16 * v).cloned().collect();
        let mut tok = vec![-1i32; 16];
        let mut s = Sampler::cpu(v).unwrap();
        s.sample(SampleArgs::new(Logits::f32(&logits), 16).row_offsets(&[0, 16]).seed(seed).step(step).tokens(&mut tok))
            .unwrap();
        tok
    };
    assert_eq!(pinned(8, 12345, 3), [2, 4, 3, 6, 4, 2, 6, 2, 4, 0, 3, 7, 4, 0, 2, 2]);
    assert_eq!(pinned(8, 0xdeadbeefcafef00d, 0), [5, 0, 6, 7, 2, 2, 0, 2, 2, 0, 2, 4, 2, 2, 4, 0]);
    assert_eq!(
        pinned(3000, 12345, 3),
        [531, 37, 243, 1941, 922, 582, 860, 107, 990, 772, 667, 702, 2485, 1803, 326, 407]
    );
    assert_eq!(
        pinned(3000, 0xdeadbeefcafef00d, 0),
        [226, 1959, 1261, 125, 1190, 91, 1225, 817, 1089, 1175, 802, 2536, 1210, 428, 858, 854]
    );
}

#[test]
fn filter_edges_ties_and_degenerate_rows() {
    let mut s = sampler(6);
    // top-k boundary tie: 2.0 at ids 1 and 4; k = 2 keeps {0 (3.0), 1} (lower id wins the tie).
    let row = [3.0f32, 2.0, 0.0, -1.0, 2.0, 1.0];
    let toks = draws(&mut s, &row, 600, |a| a.top_k(2));
    assert!(toks.iter().all(|&t| t == 0 || t == 1), "{:?}", toks);
    assert!(toks.contains(&1));
    // k >= V is off; p <= 0 keeps only the best; p = 1 is off.
    let toks = draws(&mut s, &row, 600, |a| a.top_k(6).top_p(1.0));
    assert!(toks.contains(&5) && toks.contains(&4));
    let toks = draws(&mut s, &row, 100, |a| a.top_p(0.0).temperature(3.0));
    assert!(toks.iter().all(|&t| t == 0));
    // +inf is FLT_MAX: it wins every draw, and is a finite column for the statistics.
    let inf_row = [0.0f32, f32::INFINITY, 1.0, 2.0, 0.0, 0.0];
    let toks = draws(&mut s, &inf_row, 100, |a| a);
    assert!(toks.iter().all(|&t| t == 1));
    // V = 1.
    let mut one = Sampler::cpu(1).unwrap();
    let (mut t, mut c) = ([9i32; 2], [0f32; 2]);
    one.sample(SampleArgs::new(Logits::f32(&[0.3, -2.0]), 2).tokens(&mut t).confidence(&mut c)).unwrap();
    assert_eq!((t, c), ([0, 0], [1.0, 1.0]));
}

#[test]
fn guidance_minus_inf_and_bad_uncond_rows() {
    let v = 5;
    let cond = [1.0f32, f32::NEG_INFINITY, 0.5, 2.0, 0.0, /* row 1 */ 1.0, 1.0, 1.0, 1.0, 1.0];
    let uncond = [0.0f32, 0.0, f32::NEG_INFINITY, 1.0, 0.0];
    let mut s = sampler(v);
    let mut probs = vec![0f32; 2 * v];
    let mut st = [0i32; 2];
    // Request 0 guided (-inf in c or in u stays -inf); request 1's uncond rows [1, 2) are
    // outside uncond_num_rows = 1: not guided, flagged.
    s.sample(
        SampleArgs::new(Logits::f32(&cond), 2)
            .uncond_logits(Logits::f32(&uncond))
            .uncond_row_offsets(&[0, 1])
            .guidance_scale(2.0)
            .stats(Stats::Guided)
            .probs(ProbsOut::f32(&mut probs))
            .request_status(&mut st),
    )
    .unwrap();
    assert_eq!(st, [0, request_status::BAD_UNCOND_ROWS]);
    let l: Vec<f32> = (0..v)
        .map(|t| {
            let (c, u) = (cond[t], uncond[t]);
            if c == f32::NEG_INFINITY || u == f32::NEG_INFINITY { f32::NEG_INFINITY } else { 2.0f32.mul_add(c - u, c) }
        })
        .collect();
    let want = softmax(&l);
    assert_eq!((probs[1], probs[2]), (0.0, 0.0));
    for t in 0..v {
        assert_close("guided", probs[t] as f64, want[t], 1e-5, 1e-7);
        assert_close("unguided", probs[v + t] as f64, 0.2, 1e-5, 1e-7);
    }
}

#[test]
fn chi_square_over_blocks_with_filters() {
    // V = 2100: three 1024-token blocks, top-k 40 + top-p straddling blocks, mixed with plain
    // requests in the same call; the sampled frequencies follow the filtered distribution.
    let v = 2100;
    let mut row = vec![-8.0f32; v];
    for (i, t) in [3usize, 900, 1023, 1024, 1500, 2047, 2048, 2099, 10, 1100].iter().enumerate() {
        row[*t] = 1.0 - 0.15 * i as f32;
    }
    let (k, p) = (8, 0.9f32);
    let keep = keep_set(&row, k, p, 0.0);
    let want = softmax_over(&row, &keep);
    let plain = softmax(&row);
    let n = 4000;
    let logits: Vec<f32> = row.iter().cycle().take(n * v).cloned().collect();
    let ks: Vec<i32> = (0..n).map(|i| if i % 2 == 0 { k as i32 } else { 0 }).collect();
    let ps: Vec<f32> = (0..n).map(|i| if i % 2 == 0 { p } else { 1.0 }).collect();
    let mut s = sampler(v);
    let mut counts = vec![[0usize; 2]; v];
    for call in 0..4u64 {
        let seeds: Vec<u64> = (0..n as u64).map(|i| call * 1_000_003 + i).collect();
        let mut tok = vec![0i32; n];
        s.sample(SampleArgs::new(Logits::f32(&logits), n).top_ks(&ks).top_ps(&ps).seeds(&seeds).tokens(&mut tok))
            .unwrap();
        for (i, &t) in tok.iter().enumerate() {
            counts[t as usize][i % 2] += 1;
        }
    }
    for (kind, dist) in [(0usize, &want), (1, &plain)] {
        let total = (2 * n) as f64;
        let mut chi2 = 0.0;
        let mut df = 0;
        let mut tail = 0.0; // expected mass of tokens too rare for a cell of their own
        let mut tail_obs = 0.0;
        for t in 0..v {
            let e = total * dist[t];
            let o = counts[t][kind] as f64;
            if e >= 5.0 {
                chi2 += (o - e).powi(2) / e;
                df += 1;
            } else {
                tail += e;
                tail_obs += o;
            }
            if dist[t] == 0.0 {
                assert_eq!(counts[t][kind], 0, "kind {}: token {} is filtered out", kind, t);
            }
        }
        if tail > 0.0 {
            chi2 += (tail_obs - tail).powi(2) / tail.max(1.0);
            df += 1;
        }
        // Generous bound (p << 1e-3 for these df); deterministic seeds, so no flakes.
        assert!(chi2 < 3.0 * df as f64 + 30.0, "kind {}: chi-square {} with {} cells", kind, chi2, df);
    }
}

#[test]
fn stash_ties_empty_rows_and_bf16_with_stride() {
    let v = 8;
    let stride = 11;
    let n_top = 5;
    let e = n_top + 1;
    // Row 0: ties (2.0 at 1, 4, 6); row 1: nothing finite.
    let mut rows = vec![0f32; stride + v];
    rows[..v].copy_from_slice(&[0.0, 2.0, -1.0, 1.0, 2.0, f32::NEG_INFINITY, 2.0, 0.5]);
    for x in &mut rows[stride..stride + v] {
        *x = f32::NEG_INFINITY;
    }
    for x in &mut rows[v..stride] {
        *x = 99.0; // padding: must be ignored
    }
    let bits = half::to_bf16(&rows);
    let mut s = sampler(v);
    let (mut ids, mut lps, mut ranks) = (vec![-7i32; 2 * e], vec![0f32; 2 * e], vec![-9i32; 2 * e]);
    s.stash(
        StashArgs::new(Logits::half(&bits, Dtype::Bf16), 2)
            .row_stride(stride)
            .row_offsets(&[0, 2])
            .num_top(n_top)
            .layout(1, 2)
            .out_token_ids(&mut ids)
            .out_logprobs(&mut lps)
            .out_ranks(&mut ranks),
    )
    .unwrap();
    assert_eq!(&ids[..e], &[1, 1, 4, 6, 3, 7]);
    assert_eq!(&ranks[..e], &[1, 1, 1, 1, 4, 5]);
    assert_eq!(lps[1], lps[2]);
    // The empty row: entry 0 is token 0 at -inf, rank 0; padding after.
    assert_eq!(&ids[e..], &[0; 6]);
    assert_eq!(&ranks[e..], &[0; 6]);
    assert!(lps[e..].iter().all(|&x| x == f32::NEG_INFINITY));
}
