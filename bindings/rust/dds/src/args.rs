//! `SampleArgs`: the builder of `dds_sample_args`, plus what it shares with `StashArgs`
//! (memory spaces, logits and probability buffers, length checks).
use crate::device::{DevicePtr, DevicePtrMut};
use crate::error::{Error, Result};
use crate::{sys, Dtype, Stats};
use std::ffi::c_void;
use std::marker::PhantomData;

mod sealed {
    pub trait Sealed {}
    impl Sealed for super::Host {}
    impl Sealed for super::Device {}
}

/// Where the buffers of an argument builder live: [`Host`] or [`Device`]. Sealed.
pub trait Space: sealed::Sealed {
    /// `"host"` or `"device"`.
    const NAME: &'static str;
}

/// Host memory (slices): the CPU backend. The default space of the builders.
#[derive(Debug)]
pub enum Host {}
/// CUDA device or managed memory ([`DevicePtr`] buffers): the CUDA backend.
#[derive(Debug)]
pub enum Device {}
impl Space for Host {
    const NAME: &'static str = "host";
}
impl Space for Device {
    const NAME: &'static str = "device";
}

/// What length a buffer needs, in elements.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Need {
    Rows,
    Requests,
    RequestsPlus1,
    /// `num_requests * num_top` (stash token ids)
    RequestsTimesTop,
    /// `num_slots * rows_per_slot * (num_top + 1)` (stash outputs)
    StashOut,
    /// `num_requests * num_drafts` (verify draft tokens)
    RequestsTimesDrafts,
    /// `num_requests * (num_drafts + 1)` (verify outputs)
    RequestsTimesDraftsPlus1,
    /// `(num_requests - 1) * allowed_mask_stride + ceil(vocab_size / 32)` (allowed-token masks)
    AllowedMasks,
}

/// The sizes of one call that buffer lengths are checked against (`None`: not part of this
/// call's arguments).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Sizes {
    pub rows: usize,
    pub requests: usize,
    pub num_top: Option<usize>,
    pub stash_out: Option<usize>,
    pub drafts: Option<usize>,
    /// int32 words the allowed-token masks span ([`mask_words`]).
    pub mask_words: usize,
}

/// Checks every buffer of `bufs` against `sizes`.
pub(crate) fn check_bufs(func: &str, bufs: &Bufs, sizes: &Sizes) -> Result<()> {
    let overflow = || Error::invalid(format!("{}: args sizes overflow usize", func));
    for b in &bufs.0 {
        let (need, why) = match b.need {
            Need::Rows => (sizes.rows, "num_rows"),
            Need::Requests => (sizes.requests, "num_requests"),
            Need::RequestsPlus1 => (sizes.requests.saturating_add(1), "num_requests + 1"),
            Need::RequestsTimesTop => (
                sizes.requests.checked_mul(sizes.num_top.unwrap_or(0)).ok_or_else(overflow)?,
                "num_requests * num_top",
            ),
            Need::StashOut => {
                (sizes.stash_out.unwrap_or(0), "num_slots * rows_per_slot * (num_top + 1)")
            }
            Need::RequestsTimesDrafts => (
                sizes.requests.checked_mul(sizes.drafts.unwrap_or(0)).ok_or_else(overflow)?,
                "num_requests * num_drafts",
            ),
            Need::RequestsTimesDraftsPlus1 => (
                sizes
                    .requests
                    .checked_mul(sizes.drafts.unwrap_or(0).saturating_add(1))
                    .ok_or_else(overflow)?,
                "num_requests * (num_drafts + 1)",
            ),
            Need::AllowedMasks => (
                sizes.mask_words,
                "(num_requests - 1) * allowed_mask_stride + ceil(vocab_size / 32)",
            ),
        };
        check_len(func, b.name, b.len, need, why)?;
    }
    Ok(())
}

#[derive(Clone, Debug)]
pub(crate) struct Buf {
    pub name: &'static str,
    pub len: usize,
    pub need: Need,
}

/// The buffers given so far, with their lengths (a setter called twice replaces its entry).
#[derive(Clone, Debug, Default)]
pub(crate) struct Bufs(pub Vec<Buf>);

impl Bufs {
    pub fn set(&mut self, name: &'static str, len: usize, need: Need) {
        self.0.retain(|b| b.name != name);
        self.0.push(Buf { name, len, need });
    }
}

/// The number of requests: explicit, else `row_offsets.len() - 1`, else one per row.
pub(crate) fn requests_of(func: &str, bufs: &Bufs, explicit: Option<usize>, rows: usize)
    -> Result<usize> {
    let offsets_len = bufs.0.iter().find(|b| b.name == "row_offsets").map(|b| b.len);
    match (explicit, offsets_len) {
        (Some(n), _) => Ok(n),
        (None, Some(0)) => Err(Error::invalid(format!(
            "{}: args.row_offsets is empty; it needs num_requests + 1 elements",
            func
        ))),
        (None, Some(n)) => Ok(n - 1),
        (None, None) => Ok(rows),
    }
}

/// Checks a buffer length: `len >= need`.
pub(crate) fn check_len(func: &str, name: &str, len: usize, need: usize, why: &str) -> Result<()> {
    if len < need {
        return Err(Error::invalid(format!(
            "{}: args.{} has {} elements but needs at least {} ({})",
            func, name, len, need, why
        )));
    }
    Ok(())
}

/// Elements a `[rows, stride]` matrix of rows of `vocab` columns spans: `(rows - 1) * stride +
/// vocab` (0 for no rows).
pub(crate) fn matrix_len(func: &str, name: &str, rows: usize, stride: usize, vocab: usize)
    -> Result<usize> {
    if rows == 0 {
        return Ok(0);
    }
    (rows - 1)
        .checked_mul(stride)
        .and_then(|x| x.checked_add(vocab))
        .ok_or_else(|| Error::invalid(format!("{}: args.{} size overflows usize", func, name)))
}

/// int32 words that `requests` allowed-token masks span with a stride of `stride` words (0 or
/// less = ceil(vocab / 32), as the library resolves it).
pub(crate) fn mask_words(func: &str, requests: usize, stride: i64, vocab: usize) -> Result<usize> {
    let words = (vocab + 31) / 32;
    let stride = if stride <= 0 { words } else { stride as usize };
    matrix_len(func, "allowed_token_masks", requests, stride, words)
}

pub(crate) fn to_i32(func: &str, name: &str, v: usize) -> Result<i32> {
    i32::try_from(v).map_err(|_| {
        Error::invalid(format!("{}: args.{} ({}) does not fit in int32", func, name, v))
    })
}

pub(crate) fn to_i64(func: &str, name: &str, v: usize) -> Result<i64> {
    i64::try_from(v).map_err(|_| {
        Error::invalid(format!("{}: args.{} ({}) does not fit in int64", func, name, v))
    })
}

/// A borrowed logits matrix `[rows, row_stride]` of one [`Dtype`]: slices on the host
/// (`Logits::f32`, `Logits::bf16`, ...) or device buffers (`Logits::device_f32`, ...).
/// 16-bit dtypes are passed as their raw bits in `u16` (see [`crate::half`]).
#[derive(Debug)]
pub struct Logits<'a, S: Space = Host> {
    pub(crate) ptr: *const c_void,
    pub(crate) len: usize,
    pub(crate) dtype: Dtype,
    pub(crate) bad: Option<&'static str>,
    _m: PhantomData<(&'a [u8], S)>,
}

impl<'a, S: Space> Logits<'a, S> {
    fn raw(ptr: *const c_void, len: usize, dtype: Dtype) -> Self {
        Logits { ptr, len, dtype, bad: None, _m: PhantomData }
    }
    fn half_raw(ptr: *const c_void, len: usize, dtype: Dtype) -> Self {
        let mut l = Logits::raw(ptr, len, dtype);
        if dtype == Dtype::F32 {
            l.bad = Some("a u16 buffer needs Dtype::Bf16 or Dtype::F16, not Dtype::F32");
        }
        l
    }
    /// Element type.
    pub fn dtype(&self) -> Dtype {
        self.dtype
    }
    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }
    /// `len() == 0`.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl<'a> Logits<'a, Host> {
    /// fp32 logits.
    pub fn f32(data: &'a [f32]) -> Self {
        Logits::raw(data.as_ptr().cast(), data.len(), Dtype::F32)
    }
    /// bfloat16 logits (raw bits).
    pub fn bf16(data: &'a [u16]) -> Self {
        Logits::raw(data.as_ptr().cast(), data.len(), Dtype::Bf16)
    }
    /// fp16 logits (raw bits).
    pub fn f16(data: &'a [u16]) -> Self {
        Logits::raw(data.as_ptr().cast(), data.len(), Dtype::F16)
    }
    /// 16-bit logits of the given dtype (`Dtype::Bf16` or `Dtype::F16`; `Dtype::F32` is an
    /// error reported by the call).
    pub fn half(data: &'a [u16], dtype: Dtype) -> Self {
        Logits::half_raw(data.as_ptr().cast(), data.len(), dtype)
    }
}

impl<'a> Logits<'a, Device> {
    /// fp32 logits in device memory.
    pub fn device_f32<D: DevicePtr<f32> + ?Sized>(data: &'a D) -> Self {
        Logits::raw(data.device_ptr().cast(), data.len(), Dtype::F32)
    }
    /// bfloat16 logits (raw bits) in device memory.
    pub fn device_bf16<D: DevicePtr<u16> + ?Sized>(data: &'a D) -> Self {
        Logits::raw(data.device_ptr().cast(), data.len(), Dtype::Bf16)
    }
    /// fp16 logits (raw bits) in device memory.
    pub fn device_f16<D: DevicePtr<u16> + ?Sized>(data: &'a D) -> Self {
        Logits::raw(data.device_ptr().cast(), data.len(), Dtype::F16)
    }
    /// 16-bit logits of the given dtype in device memory.
    pub fn device_half<D: DevicePtr<u16> + ?Sized>(data: &'a D, dtype: Dtype) -> Self {
        Logits::half_raw(data.device_ptr().cast(), data.len(), dtype)
    }
}

/// A borrowed output matrix `[rows, probs_row_stride]` for the probability rows, in one
/// [`Dtype`] (16-bit dtypes as raw bits in `u16`).
#[derive(Debug)]
pub struct ProbsOut<'a, S: Space = Host> {
    pub(crate) ptr: *mut c_void,
    pub(crate) len: usize,
    pub(crate) dtype: Dtype,
    pub(crate) bad: Option<&'static str>,
    _m: PhantomData<(&'a mut [u8], S)>,
}

impl<'a, S: Space> ProbsOut<'a, S> {
    fn raw(ptr: *mut c_void, len: usize, dtype: Dtype) -> Self {
        ProbsOut { ptr, len, dtype, bad: None, _m: PhantomData }
    }
    fn half_raw(ptr: *mut c_void, len: usize, dtype: Dtype) -> Self {
        let mut p = ProbsOut::raw(ptr, len, dtype);
        if dtype == Dtype::F32 {
            p.bad = Some("a u16 buffer needs Dtype::Bf16 or Dtype::F16, not Dtype::F32");
        }
        p
    }
}

impl<'a> ProbsOut<'a, Host> {
    /// fp32 probabilities.
    pub fn f32(out: &'a mut [f32]) -> Self {
        ProbsOut::raw(out.as_mut_ptr().cast(), out.len(), Dtype::F32)
    }
    /// bfloat16 probabilities (raw bits, round to nearest even).
    pub fn bf16(out: &'a mut [u16]) -> Self {
        ProbsOut::raw(out.as_mut_ptr().cast(), out.len(), Dtype::Bf16)
    }
    /// fp16 probabilities (raw bits, round to nearest even).
    pub fn f16(out: &'a mut [u16]) -> Self {
        ProbsOut::raw(out.as_mut_ptr().cast(), out.len(), Dtype::F16)
    }
    /// 16-bit probabilities of the given dtype.
    pub fn half(out: &'a mut [u16], dtype: Dtype) -> Self {
        ProbsOut::half_raw(out.as_mut_ptr().cast(), out.len(), dtype)
    }
}

impl<'a> ProbsOut<'a, Device> {
    /// fp32 probabilities in device memory.
    pub fn device_f32<D: DevicePtrMut<f32> + ?Sized>(out: &'a mut D) -> Self {
        let n = out.len();
        ProbsOut::raw(out.device_ptr_mut().cast(), n, Dtype::F32)
    }
    /// 16-bit probabilities of the given dtype in device memory.
    pub fn device_half<D: DevicePtrMut<u16> + ?Sized>(out: &'a mut D, dtype: Dtype) -> Self {
        let n = out.len();
        ProbsOut::half_raw(out.device_ptr_mut().cast(), n, dtype)
    }
}

/// Generates the buffer setters of an argument builder twice: for [`Host`] (slices) and for
/// [`Device`] ([`DevicePtr`] / [`DevicePtrMut`] buffers).
macro_rules! buffer_setters {
    ($ty:ident;
     inputs { $( $(#[$d:meta])* $name:ident : $t:ty => $need:ident, )* }
     outputs { $( $(#[$od:meta])* $oname:ident : $ot:ty => $oneed:ident, )* }) => {
        impl<'a> $ty<'a, crate::args::Host> {
            $(
                $(#[$d])*
                pub fn $name(mut self, v: &'a [$t]) -> Self {
                    self.raw.$name = v.as_ptr();
                    self.bufs.set(stringify!($name), v.len(), crate::args::Need::$need);
                    self
                }
            )*
            $(
                $(#[$od])*
                pub fn $oname(mut self, out: &'a mut [$ot]) -> Self {
                    self.raw.$oname = out.as_mut_ptr();
                    self.bufs.set(stringify!($oname), out.len(), crate::args::Need::$oneed);
                    self
                }
            )*
        }
        impl<'a> $ty<'a, crate::args::Device> {
            $(
                $(#[$d])*
                pub fn $name<D: crate::device::DevicePtr<$t> + ?Sized>(mut self, v: &'a D) -> Self {
                    self.raw.$name = v.device_ptr();
                    self.bufs.set(stringify!($name), v.len(), crate::args::Need::$need);
                    self
                }
            )*
            $(
                $(#[$od])*
                pub fn $oname<D: crate::device::DevicePtrMut<$ot> + ?Sized>(mut self, out: &'a mut D)
                    -> Self {
                    let n = out.len();
                    self.raw.$oname = out.device_ptr_mut();
                    self.bufs.set(stringify!($oname), n, crate::args::Need::$oneed);
                    self
                }
            )*
        }
    };
}
pub(crate) use buffer_setters;

/// Arguments of one sampling step (`dds_sample_args`), built by chained setters; consumed by
/// [`Sampler::sample`](crate::Sampler::sample) (host buffers, CPU sampler) or
/// [`Sampler::sample_device`](crate::Sampler::sample_device) (device buffers, CUDA sampler).
///
/// Rows of all requests are packed: request `r` owns rows `row_offsets[r]..row_offsets[r+1]`
/// (no `row_offsets`: one row per request). Per-request arrays (`temperatures`, `top_ks`, ...)
/// override the scalar of the same name (`temperature`, `top_k`, ...). Every output is
/// optional; give at least one. Buffers may be longer than needed; shorter is an error naming
/// the argument.
///
/// The number of requests is `row_offsets.len() - 1` when `row_offsets` is given, else
/// `num_rows`; [`num_requests`](SampleArgs::num_requests) overrides it (for buffers sized to a
/// capacity). `uncond_num_rows` defaults to the number of whole rows in `uncond_logits`.
///
/// ```
/// # use dds::{Logits, SampleArgs};
/// let logits = vec![0f32; 3 * 10];
/// let offsets = [0, 2, 3]; // request 0: rows 0-1, request 1: row 2
/// let temps = [0.7f32, 0.0]; // request 1 is greedy
/// let mut tokens = [0i32; 3];
/// let args = SampleArgs::new(Logits::f32(&logits), 3)
///     .row_offsets(&offsets)
///     .temperatures(&temps)
///     .top_p(0.9)
///     .tokens(&mut tokens);
/// # drop(args);
/// ```
///
/// The builder borrows every buffer until it is consumed, so an output cannot be read while a
/// call could still write it:
/// ```compile_fail
/// # use dds::{Logits, SampleArgs};
/// let logits = vec![0f32; 10];
/// let mut tokens = [0i32; 1];
/// let args = SampleArgs::new(Logits::f32(&logits), 1).tokens(&mut tokens);
/// println!("{}", tokens[0]); // error: `tokens` is mutably borrowed by `args`
/// drop(args);
/// ```
#[derive(Debug)]
pub struct SampleArgs<'a, S: Space = Host> {
    pub(crate) raw: sys::dds_sample_args,
    pub(crate) bufs: Bufs,
    num_rows: usize,
    num_requests: Option<usize>,
    row_stride: usize,
    logits_len: usize,
    logits_dtype: Dtype,
    uncond: Option<(usize, Dtype)>,
    uncond_num_rows: Option<usize>,
    uncond_row_stride: usize,
    probs: Option<usize>,
    probs_row_stride: usize,
    bad: Option<String>,
    _m: PhantomData<(&'a mut [u8], S)>,
}

pub(crate) fn init_sample_args() -> sys::dds_sample_args {
    let mut raw = std::mem::MaybeUninit::<sys::dds_sample_args>::zeroed();
    // Cannot fail with the current struct size (the bindings' struct is the header's).
    let st = unsafe {
        sys::dds_sample_args_init(raw.as_mut_ptr(), std::mem::size_of::<sys::dds_sample_args>())
    };
    assert_eq!(st, sys::dds_status::DDS_OK, "dds_sample_args_init failed");
    unsafe { raw.assume_init() }
}

impl<'a, S: Space> SampleArgs<'a, S> {
    fn with_logits(logits: Logits<'a, S>, num_rows: usize) -> Self {
        let mut raw = init_sample_args();
        raw.logits = logits.ptr;
        raw.dtype = logits.dtype.to_raw();
        SampleArgs {
            raw,
            bufs: Bufs::default(),
            num_rows,
            num_requests: None,
            row_stride: 0,
            logits_len: logits.len,
            logits_dtype: logits.dtype,
            uncond: None,
            uncond_num_rows: None,
            uncond_row_stride: 0,
            probs: None,
            probs_row_stride: 0,
            bad: logits.bad.map(|b| format!("args.logits: {}", b)),
            _m: PhantomData,
        }
    }

    /// Number of requests (default: `row_offsets.len() - 1`, or `num_rows` without
    /// `row_offsets`).
    pub fn num_requests(mut self, n: usize) -> Self {
        self.num_requests = Some(n);
        self
    }
    /// Elements between logits rows (default 0 = vocab_size).
    pub fn row_stride(mut self, elements: usize) -> Self {
        self.row_stride = elements;
        self
    }
    /// Elements between unconditional rows (default 0 = vocab_size).
    pub fn uncond_row_stride(mut self, elements: usize) -> Self {
        self.uncond_row_stride = elements;
        self
    }
    /// Rows in `uncond_logits` (the bound of `uncond_row_offsets`); default: the number of whole
    /// rows the buffer holds.
    pub fn uncond_num_rows(mut self, rows: usize) -> Self {
        self.uncond_num_rows = Some(rows);
        self
    }
    /// Default guidance scale g (0 = off): `l = c + g * (c - u)`.
    pub fn guidance_scale(mut self, g: f32) -> Self {
        self.raw.guidance_scale = g;
        self
    }
    /// Default temperature (1; 0 = greedy).
    pub fn temperature(mut self, t: f32) -> Self {
        self.raw.temperature = t;
        self
    }
    /// Default top-k (0 = off).
    pub fn top_k(mut self, k: i32) -> Self {
        self.raw.top_k = k;
        self
    }
    /// Default top-p (1 = off).
    pub fn top_p(mut self, p: f32) -> Self {
        self.raw.top_p = p;
        self
    }
    /// Default min-p (0 = off).
    pub fn min_p(mut self, p: f32) -> Self {
        self.raw.min_p = p;
        self
    }
    /// Default seed (Philox key).
    pub fn seed(mut self, seed: u64) -> Self {
        self.raw.seed = seed;
        self
    }
    /// Default denoising step (part of the random counter).
    pub fn step(mut self, step: u32) -> Self {
        self.raw.step = step;
        self
    }
    /// int32 words between requests' [`allowed_token_masks`](SampleArgs::allowed_token_masks)
    /// (default 0 = ceil(vocab_size / 32)).
    pub fn allowed_mask_stride(mut self, words: usize) -> Self {
        self.raw.allowed_mask_stride = words.min(i64::MAX as usize) as i64;
        self
    }
    /// A token id never sampled nor counted (the mask token); -1 = none (the default).
    pub fn banned_token(mut self, token: i32) -> Self {
        self.raw.banned_token = token;
        self
    }
    /// Which distribution the statistics describe (default [`Stats::Processed`]).
    pub fn stats(mut self, stats: Stats) -> Self {
        self.raw.stats = stats.to_raw();
        self
    }
    /// Elements between probability rows (default 0 = vocab_size).
    pub fn probs_row_stride(mut self, elements: usize) -> Self {
        self.probs_row_stride = elements;
        self
    }

    fn set_uncond(&mut self, u: Logits<'a, S>) {
        self.raw.uncond_logits = u.ptr;
        self.uncond = Some((u.len, u.dtype));
        if let Some(b) = u.bad {
            self.bad = Some(format!("args.uncond_logits: {}", b));
        }
    }

    fn set_probs(&mut self, p: ProbsOut<'a, S>) {
        self.raw.probs = p.ptr;
        self.raw.probs_dtype = p.dtype.to_raw();
        self.probs = Some(p.len);
        if let Some(b) = p.bad {
            self.bad = Some(format!("args.probs: {}", b));
        }
    }

    /// Checks every length against the call's sizes and returns the C struct.
    pub(crate) fn finish(&self, func: &str, vocab: usize) -> Result<sys::dds_sample_args> {
        if let Some(b) = &self.bad {
            return Err(Error::invalid(format!("{}: {}", func, b)));
        }
        let mut raw = self.raw;
        let rows = self.num_rows;
        let requests = requests_of(func, &self.bufs, self.num_requests, rows)?;
        let stride = if self.row_stride == 0 { vocab } else { self.row_stride };
        check_len(
            func,
            "logits",
            self.logits_len,
            matrix_len(func, "logits", rows, stride, vocab)?,
            "(num_rows - 1) * row_stride + vocab_size",
        )?;
        raw.num_rows = to_i32(func, "num_rows", rows)?;
        raw.num_requests = to_i32(func, "num_requests", requests)?;
        raw.row_stride = to_i64(func, "row_stride", self.row_stride)?;
        if let Some((len, dtype)) = self.uncond {
            if dtype != self.logits_dtype {
                return Err(Error::invalid(format!(
                    "{}: args.uncond_logits has dtype {:?} but logits has dtype {:?} (one dtype \
                     for both)",
                    func, dtype, self.logits_dtype
                )));
            }
            let ustride = if self.uncond_row_stride == 0 { vocab } else { self.uncond_row_stride };
            let urows = match self.uncond_num_rows {
                Some(n) => {
                    check_len(
                        func,
                        "uncond_logits",
                        len,
                        matrix_len(func, "uncond_logits", n, ustride, vocab)?,
                        "(uncond_num_rows - 1) * uncond_row_stride + vocab_size",
                    )?;
                    n
                }
                None if len < vocab => 0,
                None => ((len - vocab) / ustride.max(1) + 1).min(i32::MAX as usize),
            };
            raw.uncond_num_rows = to_i32(func, "uncond_num_rows", urows)?;
            raw.uncond_row_stride = to_i64(func, "uncond_row_stride", self.uncond_row_stride)?;
        }
        if let Some(len) = self.probs {
            let pstride = if self.probs_row_stride == 0 { vocab } else { self.probs_row_stride };
            check_len(
                func,
                "probs",
                len,
                matrix_len(func, "probs", rows, pstride, vocab)?,
                "(num_rows - 1) * probs_row_stride + vocab_size",
            )?;
        }
        raw.probs_row_stride = to_i64(func, "probs_row_stride", self.probs_row_stride)?;
        let mask_words = mask_words(func, requests, raw.allowed_mask_stride, vocab)?;
        check_bufs(func, &self.bufs, &Sizes { rows, requests, mask_words, ..Sizes::default() })?;
        Ok(raw)
    }
}

impl<'a> SampleArgs<'a, Host> {
    /// Arguments for `num_rows` rows of host `logits` (`[num_rows, row_stride]`).
    pub fn new(logits: Logits<'a, Host>, num_rows: usize) -> Self {
        SampleArgs::with_logits(logits, num_rows)
    }
    /// Unconditional logits for classifier-free guidance (same dtype as `logits`).
    pub fn uncond_logits(mut self, uncond: Logits<'a, Host>) -> Self {
        self.set_uncond(uncond);
        self
    }
    /// Output: the probability rows of the `stats` distribution.
    pub fn probs(mut self, out: ProbsOut<'a, Host>) -> Self {
        self.set_probs(out);
        self
    }
}

impl<'a> SampleArgs<'a, Device> {
    /// Arguments for `num_rows` rows of device `logits` (`[num_rows, row_stride]`).
    pub fn device(logits: Logits<'a, Device>, num_rows: usize) -> Self {
        SampleArgs::with_logits(logits, num_rows)
    }
    /// Unconditional logits for classifier-free guidance (same dtype as `logits`).
    pub fn uncond_logits(mut self, uncond: Logits<'a, Device>) -> Self {
        self.set_uncond(uncond);
        self
    }
    /// Output: the probability rows of the `stats` distribution.
    pub fn probs(mut self, out: ProbsOut<'a, Device>) -> Self {
        self.set_probs(out);
        self
    }
}

buffer_setters! { SampleArgs;
    inputs {
        /// `[num_requests + 1]` row offsets: request r owns rows `row_offsets[r]..row_offsets[r+1]`.
        row_offsets: i32 => RequestsPlus1,
        /// `[num_rows]` canvas position of each row (keys the random numbers; default: the row's
        /// index within its request).
        positions: i32 => Rows,
        /// `[num_requests]` first unconditional row of each request, -1 = not guided (default:
        /// uncond rows mirror the logits rows and every request is guided).
        uncond_row_offsets: i32 => Requests,
        /// `[num_requests]` guidance scales.
        guidance_scales: f32 => Requests,
        /// `[num_requests]` temperatures (0 = greedy).
        temperatures: f32 => Requests,
        /// `[num_requests]` top-k (0 = off).
        top_ks: i32 => Requests,
        /// `[num_requests]` top-p (1 = off).
        top_ps: f32 => Requests,
        /// `[num_requests]` min-p (0 = off).
        min_ps: f32 => Requests,
        /// `[num_requests]` seeds.
        seeds: u64 => Requests,
        /// `[num_requests]` denoising steps.
        steps: u32 => Requests,
        /// `[num_requests, allowed_mask_stride]` allowed-token bitmasks: token t of request r is
        /// allowed when bit t % 32 of word t / 32 is set (xgrammar's layout); a disallowed token
        /// is -inf, like the banned token (default: every token allowed).
        allowed_token_masks: i32 => AllowedMasks,
    }
    outputs {
        /// Output `[num_rows]`: the sampled token ids.
        tokens: i32 => Rows,
        /// Output `[num_rows]`: log-probability of the sampled token under the `stats`
        /// distribution.
        logprobs: f32 => Rows,
        /// Output `[num_rows]`: the most likely token (ties: lower id).
        argmax: i32 => Rows,
        /// Output `[num_rows]`: the largest probability.
        confidence: f32 => Rows,
        /// Output `[num_rows]`: largest minus second largest probability.
        margin: f32 => Rows,
        /// Output `[num_rows]`: entropy in nats.
        entropy: f32 => Rows,
        /// Output `[num_requests]`: [`request_status`](crate::request_status) bits.
        request_status: i32 => Requests,
    }
}
