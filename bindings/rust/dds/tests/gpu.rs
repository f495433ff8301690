//! GPU test (cargo feature `cuda-tests`): device buffers allocated through a minimal test-only
//! FFI to the CUDA runtime, sampling and stash on the CUDA backend, compared with the CPU
//! backend on the same inputs. Without a CUDA device every test prints
//! "skipped: no CUDA device" (to the real stderr, not captured) and passes.
//!
//! Build here with `bindings/rust/prep-gpu.sh`, run on the device with `bindings/rust/gpu-test.sh`.
#![cfg(feature = "cuda-tests")]
mod common;

use common::{close, Rng};
use dds::{half, DevicePtr, DevicePtrMut, Dtype, ErrorCode, Logits, ProbsOut, SampleArgs, Sampler,
          SamplerConfig, StashArgs, Stats};
use std::ffi::{c_void, CStr};
use std::io::Write;
use std::os::raw::{c_char, c_int};

/// The few CUDA runtime functions the test needs (linked from libcudart_static.a by build.rs).
mod cuda {
    use super::*;
    pub type Error = c_int;
    pub type Stream = *mut c_void;
    pub const MEMCPY_HOST_TO_DEVICE: c_int = 1;
    pub const MEMCPY_DEVICE_TO_HOST: c_int = 2;
    extern "C" {
        pub fn cudaGetDeviceCount(count: *mut c_int) -> Error;
        pub fn cudaMalloc(ptr: *mut *mut c_void, size: usize) -> Error;
        pub fn cudaFree(ptr: *mut c_void) -> Error;
        pub fn cudaMemcpy(dst: *mut c_void, src: *const c_void, count: usize, kind: c_int) -> Error;
        pub fn cudaMemset(ptr: *mut c_void, value: c_int, count: usize) -> Error;
        pub fn cudaStreamCreate(stream: *mut Stream) -> Error;
        pub fn cudaStreamDestroy(stream: Stream) -> Error;
        pub fn cudaStreamSynchronize(stream: Stream) -> Error;
        pub fn cudaGetErrorString(e: Error) -> *const c_char;
    }
    #[track_caller]
    pub fn ok(e: Error, what: &str) {
        if e != 0 {
            let s = unsafe { CStr::from_ptr(cudaGetErrorString(e)) }.to_string_lossy().into_owned();
            panic!("{} failed: {} ({})", what, s, e);
        }
    }
}

/// Prints a line to the real stderr (not captured by the test harness), in one write.
fn say(line: &str) {
    let _ = std::io::stderr().write_all(format!("{}\n", line).as_bytes());
}

/// Whether to run: a device is needed; with one, libdds must have been built with CUDA.
/// With `DDS_REQUIRE_GPU=1` (set by gpu-test.sh on the device) a missing device is a failure.
fn have_device(test: &str) -> bool {
    let mut n: c_int = 0;
    let e = unsafe { cuda::cudaGetDeviceCount(&mut n) };
    if e != 0 || n == 0 {
        let why = if e != 0 {
            let s = unsafe { CStr::from_ptr(cuda::cudaGetErrorString(e)) };
            format!("cudaGetDeviceCount: {} ({})", s.to_string_lossy(), e)
        } else {
            "0 devices".to_string()
        };
        if std::env::var("DDS_REQUIRE_GPU").map(|v| v == "1").unwrap_or(false) {
            panic!("{}: DDS_REQUIRE_GPU=1 but no usable CUDA device: {}", test, why);
        }
        say(&format!("{}: skipped: no CUDA device ({})", test, why));
        return false;
    }
    assert!(
        dds::has_cuda(),
        "a CUDA device exists but the loaded libdds was built without CUDA: point \
         LD_LIBRARY_PATH at a CUDA-enabled build"
    );
    true
}

/// A device buffer owned by the test (cudaMalloc / cudaFree), implementing dds's traits.
struct DevBuf<T> {
    ptr: *mut T,
    len: usize,
}

impl<T: Copy> DevBuf<T> {
    fn zeroed(len: usize) -> Self {
        let mut p: *mut c_void = std::ptr::null_mut();
        let bytes = (len * std::mem::size_of::<T>()).max(1);
        cuda::ok(unsafe { cuda::cudaMalloc(&mut p, bytes) }, "cudaMalloc");
        cuda::ok(unsafe { cuda::cudaMemset(p, 0, bytes) }, "cudaMemset");
        DevBuf { ptr: p.cast(), len }
    }
    fn from(host: &[T]) -> Self {
        let b = DevBuf::<T>::zeroed(host.len());
        let bytes = host.len() * std::mem::size_of::<T>();
        cuda::ok(
            unsafe { cuda::cudaMemcpy(b.ptr.cast(), host.as_ptr().cast(), bytes, cuda::MEMCPY_HOST_TO_DEVICE) },
            "cudaMemcpy H2D",
        );
        b
    }
    fn to_host(&self) -> Vec<T> {
        let mut v = Vec::with_capacity(self.len);
        let bytes = self.len * std::mem::size_of::<T>();
        cuda::ok(
            unsafe { cuda::cudaMemcpy(v.as_mut_ptr() as *mut c_void, self.ptr.cast(), bytes, cuda::MEMCPY_DEVICE_TO_HOST) },
            "cudaMemcpy D2H",
        );
        unsafe { v.set_len(self.len) };
        v
    }
}

impl<T> Drop for DevBuf<T> {
    fn drop(&mut self) {
        unsafe { cuda::cudaFree(self.ptr.cast()) };
    }
}

unsafe impl<T> DevicePtr<T> for DevBuf<T> {
    fn device_ptr(&self) -> *const T {
        self.ptr
    }
    fn len(&self) -> usize {
        self.len
    }
}
unsafe impl<T> DevicePtrMut<T> for DevBuf<T> {
    fn device_ptr_mut(&mut self) -> *mut T {
        self.ptr
    }
}

struct CudaStream(cuda::Stream);
impl CudaStream {
    fn new() -> Self {
        let mut s: cuda::Stream = std::ptr::null_mut();
        cuda::ok(unsafe { cuda::cudaStreamCreate(&mut s) }, "cudaStreamCreate");
        CudaStream(s)
    }
    fn sync(&self) {
        cuda::ok(unsafe { cuda::cudaStreamSynchronize(self.0) }, "cudaStreamSynchronize");
    }
}
impl Drop for CudaStream {
    fn drop(&mut self) {
        unsafe { cuda::cudaStreamDestroy(self.0) };
    }
}
unsafe impl dds::Stream for CudaStream {
    fn raw_stream(&self) -> dds::sys::dds_stream {
        self.0 as dds::sys::dds_stream
    }
}

/// One mixed batch: three requests with their own settings, guidance on requests 0 and 2,
/// positions, a banned token, per-request device arrays.
struct Batch {
    v: usize,
    rows: usize,
    dtype: Dtype,
    logits32: Vec<f32>,
    logits16: Vec<u16>,
    uncond32: Vec<f32>,
    uncond16: Vec<u16>,
    row_offsets: Vec<i32>,
    positions: Vec<i32>,
    uncond_row_offsets: Vec<i32>,
    guidance: Vec<f32>,
    temps: Vec<f32>,
    top_ks: Vec<i32>,
    top_ps: Vec<f32>,
    min_ps: Vec<f32>,
    seeds: Vec<u64>,
    steps: Vec<u32>,
    banned: i32,
    stats: Stats,
}

impl Batch {
    fn new(v: usize, rows: usize, dtype: Dtype, seed: u64, greedy_last: bool, stats: Stats) -> Batch {
        let mut rng = Rng(seed);
        let a = rows / 3;
        let b = rows / 2;
        let row_offsets = vec![0, a as i32, b as i32, rows as i32];
        let n0 = a;
        let n2 = rows - b;
        let mut logits32 = rng.logits(rows * v, 3.0);
        let mut uncond32 = rng.logits((n0 + n2) * v, 3.0);
        let round = |x: &mut Vec<f32>| -> Vec<u16> {
            match dtype {
                Dtype::F32 => Vec::new(),
                Dtype::Bf16 => {
                    let h = half::to_bf16(x);
                    *x = h.iter().map(|&b| half::bf16_to_f32(b)).collect();
                    h
                }
                Dtype::F16 => {
                    let h = half::to_f16(x);
                    *x = h.iter().map(|&b| half::f16_to_f32(b)).collect();
                    h
                }
            }
        };
        let logits16 = round(&mut logits32);
        let uncond16 = round(&mut uncond32);
        let positions: Vec<i32> = (0..rows).map(|i| (i * 3 + 1) as i32).collect();
        Batch {
            v,
            rows,
            dtype,
            logits32,
            logits16,
            uncond32,
            uncond16,
            row_offsets,
            positions,
            uncond_row_offsets: vec![0, -1, n0 as i32],
            guidance: vec![1.5, 0.0, 0.5],
            temps: vec![1.0, 0.7, if greedy_last { 0.0 } else { 1.3 }],
            top_ks: vec![0, 50, 20],
            top_ps: vec![1.0, 0.9, 0.95],
            min_ps: vec![0.0, 0.02, 0.0],
            seeds: vec![7, 8, 9],
            steps: vec![0, 3, 11],
            banned: (v / 2) as i32,
            stats,
        }
    }
}

#[derive(Debug, PartialEq)]
struct Out {
    tokens: Vec<i32>,
    argmax: Vec<i32>,
    logprobs: Vec<f32>,
    confidence: Vec<f32>,
    margin: Vec<f32>,
    entropy: Vec<f32>,
    probs: Vec<f32>,
    status: Vec<i32>,
}

fn probs_to_f32(dtype: Dtype, p: &[u16]) -> Vec<f32> {
    p.iter()
        .map(|&b| if dtype == Dtype::Bf16 { half::bf16_to_f32(b) } else { half::f16_to_f32(b) })
        .collect()
}

fn run_cpu(b: &Batch, probs_dtype: Dtype) -> Out {
    let mut s = Sampler::new(&SamplerConfig::new(b.v).max_rows(b.rows)).unwrap();
    let n = b.rows;
    let mut o = Out {
        tokens: vec![0; n], argmax: vec![0; n], logprobs: vec![0.0; n], confidence: vec![0.0; n],
        margin: vec![0.0; n], entropy: vec![0.0; n], probs: Vec::new(), status: vec![0; 3],
    };
    let mut p32 = vec![0f32; n * b.v];
    let mut p16 = vec![0u16; n * b.v];
    let (logits, uncond) = match b.dtype {
        Dtype::F32 => (Logits::f32(&b.logits32), Logits::f32(&b.uncond32)),
        d => (Logits::half(&b.logits16, d), Logits::half(&b.uncond16, d)),
    };
    let probs = match probs_dtype {
        Dtype::F32 => ProbsOut::f32(&mut p32),
        d => ProbsOut::half(&mut p16, d),
    };
    s.sample(
        SampleArgs::new(logits, n)
            .row_offsets(&b.row_offsets)
            .positions(&b.positions)
            .uncond_logits(uncond)
            .uncond_row_offsets(&b.uncond_row_offsets)
            .guidance_scales(&b.guidance)
            .temperatures(&b.temps)
            .top_ks(&b.top_ks)
            .top_ps(&b.top_ps)
            .min_ps(&b.min_ps)
            .seeds(&b.seeds)
            .steps(&b.steps)
            .banned_token(b.banned)
            .stats(b.stats)
            .tokens(&mut o.tokens)
            .argmax(&mut o.argmax)
            .logprobs(&mut o.logprobs)
            .confidence(&mut o.confidence)
            .margin(&mut o.margin)
            .entropy(&mut o.entropy)
            .probs(probs)
            .request_status(&mut o.status),
    )
    .unwrap();
    o.probs = if probs_dtype == Dtype::F32 { p32 } else { probs_to_f32(probs_dtype, &p16) };
    o
}

fn run_gpu(b: &Batch, probs_dtype: Dtype) -> Out {
    let mut s = Sampler::new(&SamplerConfig::new(b.v).cuda(0).max_rows(b.rows)).unwrap();
    let n = b.rows;
    let stream = CudaStream::new();
    let d_logits32 = DevBuf::from(&b.logits32);
    let d_uncond32 = DevBuf::from(&b.uncond32);
    let d_logits16 = DevBuf::from(&b.logits16);
    let d_uncond16 = DevBuf::from(&b.uncond16);
    let d_offs = DevBuf::from(&b.row_offsets);
    let d_pos = DevBuf::from(&b.positions);
    let d_uoffs = DevBuf::from(&b.uncond_row_offsets);
    let d_g = DevBuf::from(&b.guidance);
    let d_t = DevBuf::from(&b.temps);
    let d_k = DevBuf::from(&b.top_ks);
    let d_p = DevBuf::from(&b.top_ps);
    let d_mp = DevBuf::from(&b.min_ps);
    let d_seeds = DevBuf::from(&b.seeds);
    let d_steps = DevBuf::from(&b.steps);
    let mut d_tok = DevBuf::<i32>::zeroed(n);
    let mut d_am = DevBuf::<i32>::zeroed(n);
    let mut d_lp = DevBuf::<f32>::zeroed(n);
    let mut d_conf = DevBuf::<f32>::zeroed(n);
    let mut d_margin = DevBuf::<f32>::zeroed(n);
    let mut d_ent = DevBuf::<f32>::zeroed(n);
    let mut d_p32 = DevBuf::<f32>::zeroed(n * b.v);
    let mut d_p16 = DevBuf::<u16>::zeroed(n * b.v);
    let mut d_st = DevBuf::<i32>::zeroed(3);
    let (logits, uncond) = match b.dtype {
        Dtype::F32 => (Logits::device_f32(&d_logits32), Logits::device_f32(&d_uncond32)),
        d => (Logits::device_half(&d_logits16, d), Logits::device_half(&d_uncond16, d)),
    };
    let probs = match probs_dtype {
        Dtype::F32 => ProbsOut::device_f32(&mut d_p32),
        d => ProbsOut::device_half(&mut d_p16, d),
    };
    let args = SampleArgs::device(logits, n)
        .row_offsets(&d_offs)
        .positions(&d_pos)
        .uncond_logits(uncond)
        .uncond_row_offsets(&d_uoffs)
        .guidance_scales(&d_g)
        .temperatures(&d_t)
        .top_ks(&d_k)
        .top_ps(&d_p)
        .min_ps(&d_mp)
        .seeds(&d_seeds)
        .steps(&d_steps)
        .banned_token(b.banned)
        .stats(b.stats)
        .tokens(&mut d_tok)
        .argmax(&mut d_am)
        .logprobs(&mut d_lp)
        .confidence(&mut d_conf)
        .margin(&mut d_margin)
        .entropy(&mut d_ent)
        .probs(probs)
        .request_status(&mut d_st);
    // SAFETY: every buffer and the stream outlive the synchronisation below; the sampler too.
    unsafe { s.sample_device(args, &stream) }.unwrap();
    stream.sync();
    Out {
        tokens: d_tok.to_host(),
        argmax: d_am.to_host(),
        logprobs: d_lp.to_host(),
        confidence: d_conf.to_host(),
        margin: d_margin.to_host(),
        entropy: d_ent.to_host(),
        probs: if probs_dtype == Dtype::F32 { d_p32.to_host() } else { probs_to_f32(probs_dtype, &d_p16.to_host()) },
        status: d_st.to_host(),
    }
}

/// Tokens identical (at most `max_token_diffs` near-ties excepted, counted and printed),
/// statistics within 1e-5 relative, probabilities within `probs_rel`.
fn compare(name: &str, cpu: &Out, gpu: &Out, max_token_diffs: usize, probs_rel: f64) {
    let diffs = cpu.tokens.iter().zip(&gpu.tokens).filter(|(a, b)| a != b).count();
    say(&format!("{}: {} rows, {} token differences", name, cpu.tokens.len(), diffs));
    assert!(diffs <= max_token_diffs, "{}: {} tokens differ: cpu {:?} gpu {:?}", name, diffs, cpu.tokens, gpu.tokens);
    assert_eq!(cpu.argmax, gpu.argmax, "{}: argmax", name);
    assert_eq!(cpu.status, gpu.status, "{}: request_status", name);
    for (what, c, g) in [
        ("confidence", &cpu.confidence, &gpu.confidence),
        ("margin", &cpu.margin, &gpu.margin),
        ("entropy", &cpu.entropy, &gpu.entropy),
    ] {
        for (i, (&x, &y)) in c.iter().zip(g.iter()).enumerate() {
            assert!(close(x as f64, y as f64, 1e-5, 1e-6), "{}: {}[{}] cpu {} gpu {}", name, what, i, x, y);
        }
    }
    for i in 0..cpu.tokens.len() {
        if cpu.tokens[i] == gpu.tokens[i] {
            let (x, y) = (cpu.logprobs[i], gpu.logprobs[i]);
            assert!(close(x as f64, y as f64, 1e-5, 1e-6), "{}: logprobs[{}] cpu {} gpu {}", name, i, x, y);
        }
    }
    let mut worst = 0usize;
    for (i, (&x, &y)) in cpu.probs.iter().zip(&gpu.probs).enumerate() {
        if !close(x as f64, y as f64, probs_rel, 1e-7) {
            worst += 1;
            assert!(worst < 10, "{}: probs[{}] cpu {} gpu {}", name, i, x, y);
        }
    }
    assert_eq!(worst, 0, "{}: probs differ", name);
}

#[test]
fn gpu_sample_f32_matches_cpu() {
    if !have_device("gpu_sample_f32_matches_cpu") {
        return;
    }
    for &(v, rows) in &[(32001usize, 257usize), (1025, 64), (7, 3)] {
        for stats in [Stats::Processed, Stats::Guided] {
            let b = Batch::new(v, rows, Dtype::F32, 1 + v as u64, false, stats);
            let name = format!("f32 V={} rows={} {:?}", v, rows, stats);
            compare(&name, &run_cpu(&b, Dtype::F32), &run_gpu(&b, Dtype::F32), 1, 1e-5);
        }
    }
}

#[test]
fn gpu_sample_half_logits_and_probs_match_cpu() {
    if !have_device("gpu_sample_half_logits_and_probs_match_cpu") {
        return;
    }
    for dtype in [Dtype::Bf16, Dtype::F16] {
        let b = Batch::new(2053, 96, dtype, 42, true, Stats::Processed);
        let name = format!("{:?} logits + probs, V=2053", dtype);
        // 16-bit probabilities: one rounding step apart at most.
        let rel = if dtype == Dtype::Bf16 { 1.0 / 128.0 } else { 1.0 / 1024.0 };
        compare(&name, &run_cpu(&b, dtype), &run_gpu(&b, dtype), 1, rel);
    }
}

#[test]
fn gpu_stash_matches_cpu() {
    if !have_device("gpu_stash_matches_cpu") {
        return;
    }
    let (v, rows, top) = (32001usize, 40usize, 20usize);
    let logits = Rng(5).logits(rows * v, 2.0);
    let offsets = [0i32, 10, 25, 40];
    let keep = [1u8, 0, 1];
    let slots = [2i32, 0, 1];
    let temps = [1.0f32, 0.8, 0.5];
    let (num_slots, rows_per_slot) = (3usize, 16usize);
    let total = num_slots * rows_per_slot * (top + 1);
    let cfg = SamplerConfig::new(v).max_rows(rows).max_stash_width(top);

    let mut cpu = Sampler::new(&cfg).unwrap();
    let (mut ids, mut lps, mut ranks) = (vec![-7i32; total], vec![12345f32; total], vec![-9i32; total]);
    cpu.stash(
        StashArgs::new(Logits::f32(&logits), rows)
            .row_offsets(&offsets)
            .keep(&keep)
            .slots(&slots)
            .temperatures(&temps)
            .num_top(top)
            .layout(num_slots, rows_per_slot)
            .out_token_ids(&mut ids)
            .out_logprobs(&mut lps)
            .out_ranks(&mut ranks),
    )
    .unwrap();

    let mut gpu = Sampler::new(&cfg.clone().cuda(0)).unwrap();
    let stream = CudaStream::new();
    let d_logits = DevBuf::from(&logits);
    let (d_offs, d_keep, d_slots, d_t) = (DevBuf::from(&offsets), DevBuf::from(&keep), DevBuf::from(&slots), DevBuf::from(&temps));
    let mut d_ids = DevBuf::from(&vec![-7i32; total]);
    let mut d_lps = DevBuf::from(&vec![12345f32; total]);
    let mut d_ranks = DevBuf::from(&vec![-9i32; total]);
    let args = StashArgs::device(Logits::device_f32(&d_logits), rows)
        .row_offsets(&d_offs)
        .keep(&d_keep)
        .slots(&d_slots)
        .temperatures(&d_t)
        .num_top(top)
        .layout(num_slots, rows_per_slot)
        .out_token_ids(&mut d_ids)
        .out_logprobs(&mut d_lps)
        .out_ranks(&mut d_ranks);
    // SAFETY: buffers, stream and sampler outlive the synchronisation.
    unsafe { gpu.stash_device(args, &stream) }.unwrap();
    stream.sync();
    assert_eq!(d_ids.to_host(), ids, "stash token ids");
    assert_eq!(d_ranks.to_host(), ranks, "stash ranks");
    for (i, (&x, &y)) in lps.iter().zip(&d_lps.to_host()).enumerate() {
        assert!(close(x as f64, y as f64, 1e-5, 1e-6), "stash logprobs[{}] cpu {} gpu {}", i, x, y);
    }
    say(&format!("stash: {} entries match", total));
}

#[test]
fn gpu_refuses_host_pointers_and_cpu_calls() {
    if !have_device("gpu_refuses_host_pointers_and_cpu_calls") {
        return;
    }
    let v = 100;
    let host = vec![0f32; v];
    let mut host_tok = vec![0i32; 1];
    let mut s = Sampler::new(&SamplerConfig::new(v).cuda(0)).unwrap();
    // The host API on a CUDA sampler is refused by the crate.
    let e = s.sample(SampleArgs::new(Logits::f32(&host), 1).tokens(&mut host_tok)).unwrap_err();
    assert!(e.message().contains("host slices need a CPU sampler"), "{}", e);
    // Host memory dressed up as device memory is refused by libdds's residency check.
    let logits = unsafe { dds::DeviceSlice::from_raw_parts(host.as_ptr() as *mut f32, v) };
    let mut tok = unsafe { dds::DeviceSlice::from_raw_parts(host_tok.as_mut_ptr(), 1) };
    let stream = CudaStream::new();
    let e = unsafe { s.sample_device(SampleArgs::device(Logits::device_f32(&logits), 1).tokens(&mut tok), &stream) }
        .unwrap_err();
    assert_eq!(e.code(), ErrorCode::InvalidArgument, "{}", e);
    assert!(e.message().contains("logits"), "{}", e);
    // Short device buffers are refused by the crate's length checks.
    let d = DevBuf::<f32>::zeroed(v - 1);
    let mut dt = DevBuf::<i32>::zeroed(1);
    let e = unsafe { s.sample_device(SampleArgs::device(Logits::device_f32(&d), 1).tokens(&mut dt), &stream) }
        .unwrap_err();
    assert!(e.message().contains("args.logits has 99 elements"), "{}", e);
}

#[test]
fn gpu_reveal_matches_cpu() {
    if !have_device("gpu_reveal_matches_cpu") {
        return;
    }
    use dds::{RevealArgs, RevealPolicy};
    // 4 requests with different policies over 300 rows; canvas of 128 positions per request.
    let rows = 300usize;
    let offsets = [0i32, 90, 150, 260, 300];
    let mut rng = Rng(31);
    let scores: Vec<f32> = (0..rows).map(|_| rng.uniform() as f32).collect();
    let positions: Vec<i32> = (0..rows).map(|i| ((i * 37) % 128) as i32).collect();
    let tokens: Vec<i32> = (0..rows).map(|i| (i % 50) as i32).collect();
    let eligible: Vec<u8> = (0..rows).map(|i| (i % 7 != 0) as u8).collect();
    let policies = [
        RevealPolicy::TopN.to_raw(),
        RevealPolicy::Threshold.to_raw(),
        RevealPolicy::Factor.to_raw(),
        RevealPolicy::Random.to_raw(),
    ];
    let counts = [5i32, 0, 0, 3];
    let thresholds = [0.9f32, 0.8, 0.9, 0.9];
    let factors = [1.0f32, 1.0, 2.5, 1.0];
    let seeds = [1u64, 2, 3, 4];
    let (len, stride) = (128usize, 130usize);
    let canvas0: Vec<i32> = (0..4 * stride).map(|i| if i % stride < len { 99 } else { -5 }).collect();
    let cfg = SamplerConfig::new(100).max_rows(rows);

    let mut cpu = Sampler::new(&cfg).unwrap();
    let mut canvas = canvas0.clone();
    let (mut reveal, mut n, mut st) = (vec![0u8; rows], vec![0i32; 4], vec![0i32; 4]);
    cpu.reveal(
        RevealArgs::new(&scores, rows)
            .row_offsets(&offsets)
            .positions(&positions)
            .eligible(&eligible)
            .policies(&policies)
            .counts(&counts)
            .thresholds(&thresholds)
            .factors(&factors)
            .seeds(&seeds)
            .tokens(&tokens)
            .canvas(&mut canvas, len, stride)
            .mask_token(99)
            .reveal(&mut reveal)
            .num_revealed(&mut n)
            .request_status(&mut st),
    )
    .unwrap();

    let mut gpu = Sampler::new(&cfg.clone().cuda(0)).unwrap();
    let stream = CudaStream::new();
    let (d_scores, d_offs, d_pos, d_elig) =
        (DevBuf::from(&scores), DevBuf::from(&offsets), DevBuf::from(&positions), DevBuf::from(&eligible));
    let (d_pol, d_cnt, d_thr, d_fac, d_seeds, d_tok) = (
        DevBuf::from(&policies),
        DevBuf::from(&counts),
        DevBuf::from(&thresholds),
        DevBuf::from(&factors),
        DevBuf::from(&seeds),
        DevBuf::from(&tokens),
    );
    let mut d_canvas = DevBuf::from(&canvas0);
    let (mut d_rev, mut d_n, mut d_st) = (DevBuf::<u8>::zeroed(rows), DevBuf::<i32>::zeroed(4), DevBuf::<i32>::zeroed(4));
    let args = RevealArgs::device(&d_scores, rows)
        .row_offsets(&d_offs)
        .positions(&d_pos)
        .eligible(&d_elig)
        .policies(&d_pol)
        .counts(&d_cnt)
        .thresholds(&d_thr)
        .factors(&d_fac)
        .seeds(&d_seeds)
        .tokens(&d_tok)
        .canvas(&mut d_canvas, len, stride)
        .mask_token(99)
        .reveal(&mut d_rev)
        .num_revealed(&mut d_n)
        .request_status(&mut d_st);
    // SAFETY: buffers, stream and sampler outlive the synchronisation.
    unsafe { gpu.reveal_device(args, &stream) }.unwrap();
    stream.sync();
    assert_eq!(d_rev.to_host(), reveal, "reveal flags");
    assert_eq!(d_n.to_host(), n, "num_revealed");
    assert_eq!(d_st.to_host(), st, "request_status");
    assert_eq!(d_canvas.to_host(), canvas, "canvas");
    say(&format!("reveal: {} rows, {:?} revealed per request, match", rows, n));
}

/// The CPU halves of the tests above, on every machine (no device needed): the inputs are
/// well-formed and the CPU backend accepts them, so a device run can only fail on the GPU side.
#[test]
fn cpu_halves_of_the_gpu_tests_run() {
    for &(v, rows) in &[(32001usize, 257usize), (1025, 64), (7, 3)] {
        for stats in [Stats::Processed, Stats::Guided] {
            let b = Batch::new(v, rows, Dtype::F32, 1 + v as u64, false, stats);
            let o = run_cpu(&b, Dtype::F32);
            assert_eq!(o.status, [0, 0, 0]);
            assert!(o.tokens.iter().all(|&t| t >= 0 && (t as usize) < v && t != b.banned));
        }
    }
    for dtype in [Dtype::Bf16, Dtype::F16] {
        let b = Batch::new(2053, 96, dtype, 42, true, Stats::Processed);
        let o = run_cpu(&b, dtype);
        assert_eq!(o.status, [0, 0, 0]);
    }
}
