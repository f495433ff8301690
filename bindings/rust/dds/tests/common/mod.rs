//! Helpers shared by the integration tests: a deterministic RNG, reference math in f64.
#![allow(dead_code)]

/// SplitMix64: deterministic test inputs.
pub struct Rng(pub u64);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform in [0, 1).
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
    /// Standard normal (Box-Muller).
    pub fn normal(&mut self) -> f64 {
        let u1 = self.uniform().max(1e-300);
        let u2 = self.uniform();
        (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    }
    /// `n` logits = sigma * N(0, 1), as f32.
    pub fn logits(&mut self, n: usize, sigma: f64) -> Vec<f32> {
        (0..n).map(|_| (sigma * self.normal()) as f32).collect()
    }
}

/// First index of the maximum over finite (> -inf) values; None if none.
pub fn argmax(x: &[f32]) -> Option<usize> {
    let mut best: Option<usize> = None;
    for (i, &v) in x.iter().enumerate() {
        if v > f32::NEG_INFINITY && best.map_or(true, |b| v > x[b]) {
            best = Some(i);
        }
    }
    best
}

/// softmax in f64 over the columns in `set` (others 0).
pub fn softmax_over(x: &[f32], set: &[bool]) -> Vec<f64> {
    let m = x
        .iter()
        .zip(set)
        .filter(|(_, &s)| s)
        .map(|(&v, _)| v as f64)
        .fold(f64::NEG_INFINITY, f64::max);
    let z: f64 = x.iter().zip(set).filter(|(_, &s)| s).map(|(&v, _)| (v as f64 - m).exp()).sum();
    x.iter()
        .zip(set)
        .map(|(&v, &s)| if s { (v as f64 - m).exp() / z } else { 0.0 })
        .collect()
}

pub fn softmax(x: &[f32]) -> Vec<f64> {
    let set: Vec<bool> = x.iter().map(|&v| v > f32::NEG_INFINITY).collect();
    softmax_over(x, &set)
}

/// The kept set of docs/sampling.md §3 for tempered values `a` (top-k, then top-p, then min-p).
pub fn keep_set(a: &[f32], k: usize, p: f32, min_p: f32) -> Vec<bool> {
    let finite: Vec<usize> = (0..a.len()).filter(|&t| a[t] > f32::NEG_INFINITY).collect();
    let mut order = finite.clone();
    order.sort_by(|&s, &t| a[t].partial_cmp(&a[s]).unwrap().then(s.cmp(&t)));
    if k > 0 && k < order.len() {
        order.truncate(k);
    }
    let m = a[order[0]] as f64;
    let e = |t: usize| (a[t] as f64 - m).exp();
    if p < 1.0 {
        let z1: f64 = order.iter().map(|&t| e(t)).sum();
        let target = p as f64 * z1;
        let mut s = 0.0;
        let mut kept = Vec::new();
        for (i, &t) in order.iter().enumerate() {
            if i > 0 && !(s < target) {
                break;
            }
            kept.push(t);
            s += e(t);
        }
        order = kept;
    }
    if min_p > 0.0 {
        order.retain(|&t| e(t) >= min_p.min(1.0) as f64);
    }
    let mut keep = vec![false; a.len()];
    for t in order {
        keep[t] = true;
    }
    keep
}

/// `l * (1/T)` in f32, as the library tempers.
pub fn temper(l: &[f32], t: f32) -> Vec<f32> {
    let inv = 1.0f32 / t;
    l.iter().map(|&x| x * inv).collect()
}

/// |a - b| <= rel * max(|a|, |b|) + abs, or both equal (infinities) or both NaN.
pub fn close(a: f64, b: f64, rel: f64, abs: f64) -> bool {
    if a == b || (a.is_nan() && b.is_nan()) {
        return true;
    }
    (a - b).abs() <= rel * a.abs().max(b.abs()) + abs
}

#[track_caller]
pub fn assert_close(what: &str, got: f64, want: f64, rel: f64, abs: f64) {
    assert!(close(got, want, rel, abs), "{}: got {} want {} (rel {}, abs {})", what, got, want, rel, abs);
}
