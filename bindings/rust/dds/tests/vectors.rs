//! The shared test vectors (tests/vectors/*.txt, see tests/vectors/README.md): each case is run
//! through the Rust API on the CPU backend and must reproduce the C library's recorded outputs:
//! identical tokens / argmax / ids / ranks / status bits, values within 1e-6 relative.
mod common;

use common::close;
use dds::{half, Logits, SampleArgs, Sampler, SamplerConfig, StashArgs, StashMode, Stats};
use std::collections::HashMap;
use std::path::PathBuf;

/// One `case ... end` block: key -> values (as text), in file order.
#[derive(Debug, Default)]
struct Case {
    name: String,
    line: usize,
    kv: HashMap<String, Vec<String>>,
}

fn parse_f32(s: &str) -> Result<f32, String> {
    let t = s.trim_start_matches('+');
    match t.to_ascii_lowercase().as_str() {
        "inf" | "infinity" => return Ok(f32::INFINITY),
        "-inf" | "-infinity" => return Ok(f32::NEG_INFINITY),
        "nan" | "-nan" => return Ok(f32::NAN),
        _ => {}
    }
    t.parse::<f32>().map_err(|e| format!("bad float `{}`: {}", s, e))
}

/// Parses the vector format: `case <name>` ... `end`, one `key values...` per line, `#`
/// comments, blank lines ignored.
fn parse(text: &str) -> Result<Vec<Case>, String> {
    let mut cases = Vec::new();
    let mut cur: Option<Case> = None;
    for (i, raw) in text.lines().enumerate() {
        let lineno = i + 1;
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let mut it = line.split_whitespace();
        let key = it.next().unwrap();
        let vals: Vec<String> = it.map(str::to_string).collect();
        match key {
            "case" => {
                if cur.is_some() {
                    return Err(format!("line {}: `case` before `end`", lineno));
                }
                cur = Some(Case { name: vals.join(" "), line: lineno, kv: HashMap::new() });
            }
            "end" => match cur.take() {
                Some(c) => cases.push(c),
                None => return Err(format!("line {}: `end` without `case`", lineno)),
            },
            _ => match cur.as_mut() {
                Some(c) => {
                    if c.kv.insert(key.to_string(), vals).is_some() {
                        return Err(format!("line {}: key `{}` given twice", lineno, key));
                    }
                }
                None => return Err(format!("line {}: `{}` outside a case", lineno, key)),
            },
        }
    }
    if let Some(c) = cur {
        return Err(format!("case `{}` (line {}) has no `end`", c.name, c.line));
    }
    Ok(cases)
}

impl Case {
    fn has(&self, key: &str) -> bool {
        self.kv.contains_key(key)
    }
    fn vals(&self, key: &str) -> &[String] {
        self.kv
            .get(key)
            .unwrap_or_else(|| panic!("case `{}`: missing key `{}`", self.name, key))
    }
    fn str(&self, key: &str) -> &str {
        &self.vals(key)[0]
    }
    fn int<T: std::str::FromStr>(&self, key: &str) -> T
    where
        T::Err: std::fmt::Debug,
    {
        let mut v = self.ints::<T>(key);
        assert_eq!(v.len(), 1, "case `{}`: `{}` must have one value", self.name, key);
        v.remove(0)
    }
    fn ints<T: std::str::FromStr>(&self, key: &str) -> Vec<T>
    where
        T::Err: std::fmt::Debug,
    {
        self.vals(key)
            .iter()
            .map(|s| {
                s.parse::<T>()
                    .unwrap_or_else(|e| panic!("case `{}` key `{}`: `{}`: {:?}", self.name, key, s, e))
            })
            .collect()
    }
    fn floats(&self, key: &str) -> Vec<f32> {
        self.vals(key)
            .iter()
            .map(|s| parse_f32(s).unwrap_or_else(|e| panic!("case `{}` key `{}`: {}", self.name, key, e)))
            .collect()
    }
    fn opt_ints<T: std::str::FromStr>(&self, key: &str) -> Option<Vec<T>>
    where
        T::Err: std::fmt::Debug,
    {
        if self.has(key) {
            Some(self.ints(key))
        } else {
            None
        }
    }
    fn opt_floats(&self, key: &str) -> Option<Vec<f32>> {
        if self.has(key) {
            Some(self.floats(key))
        } else {
            None
        }
    }
    #[track_caller]
    fn check_len<T>(&self, key: &str, v: &[T], n: usize) {
        assert_eq!(v.len(), n, "case `{}`: `{}` has {} values, expected {}", self.name, key, v.len(), n);
    }
}

/// Logits given as floats (already rounded to the dtype) -> the buffer the dtype needs.
enum Buf {
    F32(Vec<f32>),
    Half(Vec<u16>, dds::Dtype),
}

impl Buf {
    fn new(dtype: &str, v: Vec<f32>) -> Buf {
        match dtype {
            "f32" => Buf::F32(v),
            "bf16" => {
                let h = half::to_bf16(&v);
                for (x, b) in v.iter().zip(&h) {
                    assert!(x.is_nan() || half::bf16_to_f32(*b) == *x, "{} is not a bf16 value", x);
                }
                Buf::Half(h, dds::Dtype::Bf16)
            }
            "f16" => {
                let h = half::to_f16(&v);
                for (x, b) in v.iter().zip(&h) {
                    assert!(x.is_nan() || half::f16_to_f32(*b) == *x, "{} is not an f16 value", x);
                }
                Buf::Half(h, dds::Dtype::F16)
            }
            other => panic!("unknown dtype `{}`", other),
        }
    }
    fn logits(&self) -> Logits<'_> {
        match self {
            Buf::F32(v) => Logits::f32(v),
            Buf::Half(v, d) => Logits::half(v, *d),
        }
    }
}

#[track_caller]
fn assert_values(case: &str, what: &str, got: &[f32], want: &[f32]) {
    assert_eq!(got.len(), want.len(), "case `{}`: {} length", case, what);
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        assert!(
            close(g as f64, w as f64, 1e-6, 0.0),
            "case `{}`: {}[{}] = {} but the C library wrote {}",
            case,
            what,
            i,
            g,
            w
        );
    }
}

const SAMPLE_KEYS: &[&str] = &[
    "vocab", "num_rows", "num_requests", "dtype", "row_offsets", "positions", "temperatures",
    "guidance_scales", "uncond_num_rows", "uncond_row_offsets", "top_ks", "top_ps", "min_ps",
    "seeds", "steps", "banned_token", "stats", "logits", "uncond_logits", "expect_tokens",
    "expect_argmax", "expect_logprobs", "expect_confidence", "expect_margin", "expect_entropy",
    "expect_request_status",
];
const STASH_KEYS: &[&str] = &[
    "vocab", "num_rows", "num_requests", "dtype", "row_offsets", "logits", "keep", "slots",
    "num_valid", "temperatures", "committed_tokens", "token_ids", "num_token_ids", "num_top",
    "logits_mode", "num_slots", "rows_per_slot", "poison_id", "poison_value", "poison_rank",
    "expect_token_ids", "expect_logprobs", "expect_ranks",
];

/// A key this runner does not know would be an input it silently drops: refuse it.
fn check_keys(c: &Case, known: &[&str]) {
    let mut unknown: Vec<&String> = c.kv.keys().filter(|k| !known.contains(&k.as_str())).collect();
    unknown.sort();
    assert!(unknown.is_empty(), "case `{}` (line {}): keys unknown to the Rust runner: {:?}", c.name, c.line, unknown);
}

fn run_sample_case(c: &Case) {
    check_keys(c, SAMPLE_KEYS);
    let v: usize = c.int("vocab");
    let n: usize = c.int("num_rows");
    let r: usize = c.int("num_requests");
    let mut sampler = Sampler::new(
        &SamplerConfig::new(v).max_rows(n.max(1)).max_requests(r.max(1)),
    )
    .unwrap_or_else(|e| panic!("case `{}`: {}", c.name, e));
    let logits = c.floats("logits");
    c.check_len("logits", &logits, n * v);
    let logits = Buf::new(c.str("dtype"), logits);
    let row_offsets: Vec<i32> = c.ints("row_offsets");
    c.check_len("row_offsets", &row_offsets, r + 1);
    let positions: Option<Vec<i32>> = c.opt_ints("positions");
    let temperatures = c.opt_floats("temperatures");
    let guidance_scales = c.opt_floats("guidance_scales");
    let uncond_row_offsets: Option<Vec<i32>> = c.opt_ints("uncond_row_offsets");
    let uncond = c.opt_floats("uncond_logits").map(|u| Buf::new(c.str("dtype"), u));
    let top_ks: Option<Vec<i32>> = c.opt_ints("top_ks");
    let top_ps = c.opt_floats("top_ps");
    let min_ps = c.opt_floats("min_ps");
    let seeds: Option<Vec<u64>> = c.opt_ints("seeds");
    let steps: Option<Vec<u32>> = c.opt_ints("steps");

    let mut tokens = vec![-7i32; n];
    let mut argmax = vec![-7i32; n];
    let mut logprobs = vec![12345f32; n];
    let mut confidence = vec![12345f32; n];
    let mut margin = vec![12345f32; n];
    let mut entropy = vec![12345f32; n];
    let mut status = vec![-9i32; r];

    let mut a = SampleArgs::new(logits.logits(), n).num_requests(r).row_offsets(&row_offsets);
    if let Some(p) = &positions {
        a = a.positions(p);
    }
    if let Some(t) = &temperatures {
        a = a.temperatures(t);
    }
    if let Some(g) = &guidance_scales {
        a = a.guidance_scales(g);
    }
    if let Some(u) = &uncond {
        a = a.uncond_logits(u.logits());
        if c.has("uncond_num_rows") {
            a = a.uncond_num_rows(c.int("uncond_num_rows"));
        }
    }
    if let Some(o) = &uncond_row_offsets {
        a = a.uncond_row_offsets(o);
    }
    if let Some(k) = &top_ks {
        a = a.top_ks(k);
    }
    if let Some(p) = &top_ps {
        a = a.top_ps(p);
    }
    if let Some(p) = &min_ps {
        a = a.min_ps(p);
    }
    if let Some(s) = &seeds {
        a = a.seeds(s);
    }
    if let Some(s) = &steps {
        a = a.steps(s);
    }
    if c.has("banned_token") {
        a = a.banned_token(c.int("banned_token"));
    }
    if c.has("stats") {
        a = a.stats(match c.str("stats") {
            "processed" => Stats::Processed,
            "guided" => Stats::Guided,
            other => panic!("case `{}`: unknown stats `{}`", c.name, other),
        });
    }
    a = a
        .tokens(&mut tokens)
        .argmax(&mut argmax)
        .logprobs(&mut logprobs)
        .confidence(&mut confidence)
        .margin(&mut margin)
        .entropy(&mut entropy)
        .request_status(&mut status);
    sampler.sample(a).unwrap_or_else(|e| panic!("case `{}`: {}", c.name, e));

    let name = &c.name;
    assert_eq!(tokens, c.ints::<i32>("expect_tokens"), "case `{}`: tokens", name);
    assert_eq!(argmax, c.ints::<i32>("expect_argmax"), "case `{}`: argmax", name);
    assert_values(name, "logprobs", &logprobs, &c.floats("expect_logprobs"));
    assert_values(name, "confidence", &confidence, &c.floats("expect_confidence"));
    assert_values(name, "margin", &margin, &c.floats("expect_margin"));
    assert_values(name, "entropy", &entropy, &c.floats("expect_entropy"));
    if c.has("expect_request_status") {
        assert_eq!(status, c.ints::<i32>("expect_request_status"), "case `{}`: request_status", name);
    }
}

fn run_stash_case(c: &Case) {
    check_keys(c, STASH_KEYS);
    let v: usize = c.int("vocab");
    let n: usize = c.int("num_rows");
    let r: usize = c.int("num_requests");
    let num_top: usize = c.int("num_top");
    let num_slots: usize = c.int("num_slots");
    let rows_per_slot: usize = c.int("rows_per_slot");
    let mut sampler = Sampler::new(
        &SamplerConfig::new(v)
            .max_rows(n.max(1))
            .max_requests(r.max(1))
            .max_stash_width(num_top.max(1)),
    )
    .unwrap_or_else(|e| panic!("case `{}`: {}", c.name, e));
    let logits = c.floats("logits");
    c.check_len("logits", &logits, n * v);
    let logits = Buf::new(c.str("dtype"), logits);
    let row_offsets: Vec<i32> = c.ints("row_offsets");
    let keep: Option<Vec<u8>> = c.opt_ints("keep");
    let slots: Option<Vec<i32>> = c.opt_ints("slots");
    let num_valid: Option<Vec<i32>> = c.opt_ints("num_valid");
    let temperatures = c.opt_floats("temperatures");
    let committed: Option<Vec<i32>> = c.opt_ints("committed_tokens");
    let token_ids: Option<Vec<i32>> = c.opt_ints("token_ids");
    let num_token_ids: Option<Vec<i32>> = c.opt_ints("num_token_ids");
    let total = num_slots * rows_per_slot * (num_top + 1);
    // Outputs pre-filled with the case's poison values (README defaults -7, 12345, -9).
    let poison_id: i32 = if c.has("poison_id") { c.int("poison_id") } else { -7 };
    let poison_value: f32 = if c.has("poison_value") { c.floats("poison_value")[0] } else { 12345.0 };
    let poison_rank: i32 = if c.has("poison_rank") { c.int("poison_rank") } else { -9 };
    let mut ids = vec![poison_id; total];
    let mut lps = vec![poison_value; total];
    let mut ranks = vec![poison_rank; total];

    let mut a = StashArgs::new(logits.logits(), n)
        .num_requests(r)
        .row_offsets(&row_offsets)
        .num_top(num_top)
        .layout(num_slots, rows_per_slot);
    if c.has("logits_mode") {
        a = a.mode(if c.int::<i32>("logits_mode") == 1 {
            StashMode::TemperedLogits
        } else {
            StashMode::LogProbs
        });
    }
    if let Some(k) = &keep {
        a = a.keep(k);
    }
    if let Some(s) = &slots {
        a = a.slots(s);
    }
    if let Some(nv) = &num_valid {
        a = a.num_valid(nv);
    }
    if let Some(t) = &temperatures {
        a = a.temperatures(t);
    }
    if let Some(ct) = &committed {
        a = a.committed_tokens(ct);
    }
    if let Some(t) = &token_ids {
        a = a.token_ids(t);
    }
    if let Some(t) = &num_token_ids {
        a = a.num_token_ids(t);
    }
    a = a.out_token_ids(&mut ids).out_logprobs(&mut lps).out_ranks(&mut ranks);
    sampler.stash(a).unwrap_or_else(|e| panic!("case `{}`: {}", c.name, e));

    let name = &c.name;
    assert_eq!(ids, c.ints::<i32>("expect_token_ids"), "case `{}`: token ids", name);
    assert_eq!(ranks, c.ints::<i32>("expect_ranks"), "case `{}`: ranks", name);
    assert_values(name, "logprobs", &lps, &c.floats("expect_logprobs"));
}

/// `tests/vectors` of this repository, or `DDS_VECTORS_DIR`.
fn vectors_dir() -> PathBuf {
    match std::env::var_os("DDS_VECTORS_DIR") {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../tests/vectors"),
    }
}

fn load(file: &str) -> Vec<Case> {
    let path = vectors_dir().join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "cannot read the shared test vectors {}: {} (they are generated by \
             `dds_gen_vectors tests/vectors`, see tests/vectors/README.md)",
            path.display(),
            e
        )
    });
    let cases = parse(&text).unwrap_or_else(|e| panic!("{}: {}", path.display(), e));
    assert!(!cases.is_empty(), "{}: no cases", path.display());
    cases
}

#[test]
fn sample_vectors_match_the_c_library() {
    let cases = load("sample_vectors.txt");
    for c in &cases {
        run_sample_case(c);
    }
    println!("sample_vectors.txt: {} cases matched", cases.len());
}

#[test]
fn stash_vectors_match_the_c_library() {
    let cases = load("stash_vectors.txt");
    for c in &cases {
        run_stash_case(c);
    }
    println!("stash_vectors.txt: {} cases matched", cases.len());
}

/// The parser itself, on a hand-written file in the README's format (independent of the
/// generated files).
#[test]
fn parser_reads_the_format() {
    let text = "# comment\n\
        case tiny greedy\n\
        vocab 4\nnum_rows 2\nnum_requests 1\ndtype f32\nrow_offsets 0 2\n\
        temperatures 0\nstats processed\n\
        logits 0 1 -inf 0.5 3 nan 2 inf\n\
        expect_tokens 1 3\nexpect_argmax 1 3\n\
        expect_logprobs 0 0\nexpect_confidence 1 1\nexpect_margin 1 1\nexpect_entropy 0 0\n\
        expect_request_status 0\n\
        end\n";
    let cases = parse(text).unwrap();
    assert_eq!(cases.len(), 1);
    let c = &cases[0];
    assert_eq!(c.name, "tiny greedy");
    let l = c.floats("logits");
    assert_eq!(l[2], f32::NEG_INFINITY);
    assert!(l[5].is_nan());
    assert_eq!(l[7], f32::INFINITY);
    // +inf -> FLT_MAX, NaN -> -inf: the greedy token of row 1 is 3.
    run_sample_case(c);
    assert!(parse("case a\nvocab 1\n").is_err());
    assert!(parse("vocab 1\n").is_err());
    assert!(parse("case a\nvocab 1\nvocab 2\nend\n").is_err());
}
