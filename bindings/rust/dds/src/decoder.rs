//! Decoder primitives: `RevealArgs` (`dds_reveal`: which positions to commit this step) and
//! `VerifyArgs` (`dds_verify_drafts`: exact speculative verification). See docs/decoding.md.
use crate::args::{buffer_setters, check_bufs, check_len, mask_words, matrix_len, requests_of, to_i32,
                  to_i64, Bufs, Device, Host, Logits, Need, Sizes, Space};
use crate::device::DevicePtrMut;
use crate::error::{Error, Result};
use crate::{sys, Dtype};
use std::marker::PhantomData;

/// How a request picks the rows to reveal (`dds_reveal_policy`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum RevealPolicy {
    /// The `n` best eligible rows (`n` = count, or `ceil(eligible / steps_left)` when count <= 0).
    #[default]
    TopN,
    /// Every eligible row with score >= threshold, at least the best one.
    Threshold,
    /// Fast-dLLM's factor rule: the n-th best while score >= 1 - f / (n + 1), at least one.
    Factor,
    /// `n` eligible rows uniformly at random (counter-based noise).
    Random,
    /// EB-sampler: scores are entropies (lower first); the longest prefix whose entropies, less
    /// the largest, sum to at most the request's entropy bound (at least one row).
    EntropyBound,
}

impl RevealPolicy {
    /// The C enum value (`DDS_REVEAL_*`), for the per-request `policies` array.
    pub fn to_raw(self) -> i32 {
        let v = match self {
            RevealPolicy::TopN => sys::dds_reveal_policy::DDS_REVEAL_TOP_N,
            RevealPolicy::Threshold => sys::dds_reveal_policy::DDS_REVEAL_THRESHOLD,
            RevealPolicy::Factor => sys::dds_reveal_policy::DDS_REVEAL_FACTOR,
            RevealPolicy::Random => sys::dds_reveal_policy::DDS_REVEAL_RANDOM,
            RevealPolicy::EntropyBound => sys::dds_reveal_policy::DDS_REVEAL_ENTROPY_BOUND,
        };
        v.0 as i32
    }
}

/// Arguments of [`Sampler::reveal`](crate::Sampler::reveal) (`dds_reveal`): per row a score and
/// an eligibility flag; per request a policy picks rows; `reveal[i]` (required) is written for
/// every row. With a [`canvas`](RevealArgs::canvas), each revealed row's token is written at
/// its position and the EOS rule applied.
///
/// ```
/// # use dds::{RevealArgs, RevealPolicy};
/// let scores = [0.9f32, 0.2, 0.7, 0.95];
/// let positions = [3, 5, 6, 9];
/// let mut reveal = [0u8; 4];
/// let args = RevealArgs::new(&scores, 4)
///     .row_offsets(&[0, 4])
///     .positions(&positions)
///     .policy(RevealPolicy::TopN)
///     .count(2)
///     .reveal(&mut reveal);
/// # drop(args);
/// ```
#[derive(Debug)]
pub struct RevealArgs<'a, S: Space = Host> {
    pub(crate) raw: sys::dds_reveal_args,
    pub(crate) bufs: Bufs,
    num_rows: usize,
    num_requests: Option<usize>,
    canvas: Option<(usize, usize, usize)>, // (len, length, stride)
    _m: PhantomData<(&'a mut [u8], S)>,
}

impl<'a, S: Space> RevealArgs<'a, S> {
    fn with_scores(ptr: *const f32, len: usize, num_rows: usize) -> Self {
        let mut raw = std::mem::MaybeUninit::<sys::dds_reveal_args>::zeroed();
        let st = unsafe {
            sys::dds_reveal_args_init(raw.as_mut_ptr(), std::mem::size_of::<sys::dds_reveal_args>())
        };
        assert_eq!(st, sys::dds_status::DDS_OK, "dds_reveal_args_init failed");
        let mut raw = unsafe { raw.assume_init() };
        raw.scores = ptr;
        let mut bufs = Bufs::default();
        bufs.set("scores", len, Need::Rows);
        RevealArgs { raw, bufs, num_rows, num_requests: None, canvas: None, _m: PhantomData }
    }

    /// Number of requests (default: `row_offsets.len() - 1`, or `num_rows`).
    pub fn num_requests(mut self, n: usize) -> Self {
        self.num_requests = Some(n);
        self
    }
    /// Default policy (TopN).
    pub fn policy(mut self, p: RevealPolicy) -> Self {
        self.raw.policy = p.to_raw();
        self
    }
    /// Default n for TopN / Random (1; n <= 0 means "use steps_left").
    pub fn count(mut self, n: i32) -> Self {
        self.raw.count = n;
        self
    }
    /// Default threshold tau (0.9).
    pub fn threshold(mut self, tau: f32) -> Self {
        self.raw.threshold = tau;
        self
    }
    /// Default factor f (1).
    pub fn factor(mut self, f: f32) -> Self {
        self.raw.factor = f;
        self
    }
    /// Default entropy bound of [`RevealPolicy::EntropyBound`] (0.1 nats).
    pub fn entropy_bound(mut self, bound: f32) -> Self {
        self.raw.entropy_bound = bound;
        self
    }
    /// Default position temperature (0 = off): TopN ranks by score / tau + Gumbel noise.
    pub fn position_temperature(mut self, tau: f32) -> Self {
        self.raw.position_temperature = tau;
        self
    }
    /// Default seed.
    pub fn seed(mut self, seed: u64) -> Self {
        self.raw.seed = seed;
        self
    }
    /// Default step.
    pub fn step(mut self, step: u32) -> Self {
        self.raw.step = step;
        self
    }
    /// Canvas value of a still-masked position (EOS rule).
    pub fn mask_token(mut self, t: i32) -> Self {
        self.raw.mask_token = t;
        self
    }
    /// EOS token (-1 = no EOS rule, the default).
    pub fn eos_token(mut self, t: i32) -> Self {
        self.raw.eos_token = t;
        self
    }

    pub(crate) fn finish(&self, func: &str) -> Result<sys::dds_reveal_args> {
        let mut raw = self.raw;
        let rows = self.num_rows;
        let requests = requests_of(func, &self.bufs, self.num_requests, rows)?;
        raw.num_rows = to_i32(func, "num_rows", rows)?;
        raw.num_requests = to_i32(func, "num_requests", requests)?;
        if let Some((len, length, stride)) = self.canvas {
            let stride_eff = if stride == 0 { length } else { stride };
            check_len(
                func,
                "canvas",
                len,
                matrix_len(func, "canvas", requests, stride_eff, length)?,
                "(num_requests - 1) * canvas_stride + canvas_length",
            )?;
            raw.canvas_length = to_i32(func, "canvas_length", length)?;
            raw.canvas_stride = to_i64(func, "canvas_stride", stride_eff)?;
        }
        check_bufs(func, &self.bufs, &Sizes { rows, requests, ..Sizes::default() })?;
        Ok(raw)
    }
}

impl<'a> RevealArgs<'a, Host> {
    /// Arguments for `num_rows` rows ranked by host `scores` (higher is better).
    pub fn new(scores: &'a [f32], num_rows: usize) -> Self {
        RevealArgs::with_scores(scores.as_ptr(), scores.len(), num_rows)
    }
    /// The canvas, `[num_requests, canvas_stride]` token ids (one row per request), read for the
    /// EOS rule and written at revealed positions; `canvas_stride` 0 = `canvas_length`. Needs
    /// [`tokens`](RevealArgs::tokens).
    pub fn canvas(mut self, canvas: &'a mut [i32], canvas_length: usize, canvas_stride: usize) -> Self {
        self.raw.canvas = canvas.as_mut_ptr();
        self.canvas = Some((canvas.len(), canvas_length, canvas_stride));
        self
    }
}

impl<'a> RevealArgs<'a, Device> {
    /// Arguments for `num_rows` rows ranked by device `scores`.
    pub fn device<D: crate::device::DevicePtr<f32> + ?Sized>(scores: &'a D, num_rows: usize) -> Self {
        RevealArgs::with_scores(scores.device_ptr(), scores.len(), num_rows)
    }
    /// The canvas in device memory (see the host version).
    pub fn canvas<D: DevicePtrMut<i32> + ?Sized>(
        mut self,
        canvas: &'a mut D,
        canvas_length: usize,
        canvas_stride: usize,
    ) -> Self {
        let n = canvas.len();
        self.raw.canvas = canvas.device_ptr_mut();
        self.canvas = Some((n, canvas_length, canvas_stride));
        self
    }
}

buffer_setters! { RevealArgs;
    inputs {
        /// `[num_requests + 1]` row offsets (default: one row per request).
        row_offsets: i32 => RequestsPlus1,
        /// `[num_rows]` canvas position of each row (default: the index in the request).
        positions: i32 => Rows,
        /// `[num_rows]` nonzero = may be revealed (default: all).
        eligible: u8 => Rows,
        /// `[num_requests]` policies ([`RevealPolicy::to_raw`] values).
        policies: i32 => Requests,
        /// `[num_requests]` n for TopN / Random.
        counts: i32 => Requests,
        /// `[num_requests]` steps left: n = ceil(eligible / steps_left) when n <= 0.
        steps_left: i32 => Requests,
        /// `[num_requests]` thresholds.
        thresholds: f32 => Requests,
        /// `[num_requests]` factors.
        factors: f32 => Requests,
        /// `[num_requests]` entropy bounds ([`RevealPolicy::EntropyBound`]).
        entropy_bounds: f32 => Requests,
        /// `[num_requests]` position temperatures.
        position_temperatures: f32 => Requests,
        /// `[num_requests]` seeds.
        seeds: u64 => Requests,
        /// `[num_requests]` steps.
        steps: u32 => Requests,
        /// `[num_rows]` token of each row, written to the canvas when revealed.
        tokens: i32 => Rows,
    }
    outputs {
        /// Output `[num_rows]` (required): 1 = revealed.
        reveal: u8 => Rows,
        /// Output `[num_requests]`: rows revealed per request.
        num_revealed: i32 => Requests,
        /// Output `[num_requests]`: EOS rule result (0/1).
        finished: i32 => Requests,
        /// Output `[num_requests]`: [`request_status`](crate::request_status) bits.
        request_status: i32 => Requests,
    }
}

/// Arguments of [`Sampler::verify_drafts`](crate::Sampler::verify_drafts)
/// (`dds_verify_drafts`): request `r` drafted up to `num_drafts` tokens; draft logits row
/// `r * num_drafts + i` is q_i, target logits row `r * (num_drafts + 1) + i` is p_i. Outputs:
/// the accepted count per request (required) and `[num_requests, num_drafts + 1]` tokens
/// (required): the accepted drafts, the corrected or bonus token, then -1.
#[derive(Debug)]
pub struct VerifyArgs<'a, S: Space = Host> {
    pub(crate) raw: sys::dds_verify_args,
    pub(crate) bufs: Bufs,
    num_requests: usize,
    num_drafts: usize,
    target: (usize, Dtype),
    draft: Option<(usize, Dtype)>,
    draft_stride: usize,
    target_stride: usize,
    bad: Option<String>,
    _m: PhantomData<(&'a mut [u8], S)>,
}

impl<'a, S: Space> VerifyArgs<'a, S> {
    fn with_target(target: Logits<'a, S>, num_requests: usize, num_drafts: usize) -> Self {
        let mut raw = std::mem::MaybeUninit::<sys::dds_verify_args>::zeroed();
        let st = unsafe {
            sys::dds_verify_args_init(raw.as_mut_ptr(), std::mem::size_of::<sys::dds_verify_args>())
        };
        assert_eq!(st, sys::dds_status::DDS_OK, "dds_verify_args_init failed");
        let mut raw = unsafe { raw.assume_init() };
        raw.target_logits = target.ptr;
        raw.dtype = target.dtype.to_raw();
        VerifyArgs {
            raw,
            bufs: Bufs::default(),
            num_requests,
            num_drafts,
            target: (target.len, target.dtype),
            draft: None,
            draft_stride: 0,
            target_stride: 0,
            bad: target.bad.map(|b| format!("args.target_logits: {}", b)),
            _m: PhantomData,
        }
    }

    fn set_draft(&mut self, d: Logits<'a, S>) {
        self.raw.draft_logits = d.ptr;
        self.draft = Some((d.len, d.dtype));
        if let Some(b) = d.bad {
            self.bad = Some(format!("args.draft_logits: {}", b));
        }
    }

    /// Elements between draft logits rows (0 = vocab_size).
    pub fn draft_row_stride(mut self, elements: usize) -> Self {
        self.draft_stride = elements;
        self
    }
    /// Elements between target logits rows (0 = vocab_size).
    pub fn target_row_stride(mut self, elements: usize) -> Self {
        self.target_stride = elements;
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
    /// Default seed.
    pub fn seed(mut self, seed: u64) -> Self {
        self.raw.seed = seed;
        self
    }
    /// Default step.
    pub fn step(mut self, step: u32) -> Self {
        self.raw.step = step;
        self
    }
    /// A token id never sampled nor counted; -1 = none.
    pub fn banned_token(mut self, t: i32) -> Self {
        self.raw.banned_token = t;
        self
    }
    /// int32 words between requests' allowed-token masks (default 0 = ceil(vocab_size / 32)).
    pub fn allowed_mask_stride(mut self, words: usize) -> Self {
        self.raw.allowed_mask_stride = words.min(i64::MAX as usize) as i64;
        self
    }

    pub(crate) fn finish(&self, func: &str, vocab: usize) -> Result<sys::dds_verify_args> {
        if let Some(b) = &self.bad {
            return Err(Error::invalid(format!("{}: {}", func, b)));
        }
        let mut raw = self.raw;
        let (r, n) = (self.num_requests, self.num_drafts);
        raw.num_requests = to_i32(func, "num_requests", r)?;
        raw.num_drafts = to_i32(func, "num_drafts", n)?;
        let overflow = || Error::invalid(format!("{}: args sizes overflow usize", func));
        let target_rows = r.checked_mul(n + 1).ok_or_else(overflow)?;
        let draft_rows = r.checked_mul(n).ok_or_else(overflow)?;
        let tstride = if self.target_stride == 0 { vocab } else { self.target_stride };
        check_len(
            func,
            "target_logits",
            self.target.0,
            matrix_len(func, "target_logits", target_rows, tstride, vocab)?,
            "(num_requests * (num_drafts + 1) - 1) * target_row_stride + vocab_size",
        )?;
        raw.target_row_stride = to_i64(func, "target_row_stride", self.target_stride)?;
        if let Some((len, dtype)) = self.draft {
            if dtype != self.target.1 {
                return Err(Error::invalid(format!(
                    "{}: args.draft_logits has dtype {:?} but target_logits has dtype {:?}",
                    func, dtype, self.target.1
                )));
            }
            let dstride = if self.draft_stride == 0 { vocab } else { self.draft_stride };
            check_len(
                func,
                "draft_logits",
                len,
                matrix_len(func, "draft_logits", draft_rows, dstride, vocab)?,
                "(num_requests * num_drafts - 1) * draft_row_stride + vocab_size",
            )?;
        }
        raw.draft_row_stride = to_i64(func, "draft_row_stride", self.draft_stride)?;
        let mask_words = mask_words(func, r, raw.allowed_mask_stride, vocab)?;
        let sizes = Sizes { rows: 0, requests: r, drafts: Some(n), mask_words, ..Sizes::default() };
        check_bufs(func, &self.bufs, &sizes)?;
        Ok(raw)
    }
}

impl<'a> VerifyArgs<'a, Host> {
    /// Arguments for `num_requests` requests of up to `num_drafts` drafts, with host target
    /// logits `[num_requests * (num_drafts + 1), target_row_stride]`.
    pub fn new(target_logits: Logits<'a, Host>, num_requests: usize, num_drafts: usize) -> Self {
        VerifyArgs::with_target(target_logits, num_requests, num_drafts)
    }
    /// Draft logits `[num_requests * num_drafts, draft_row_stride]` (required when
    /// `num_drafts > 0`; same dtype as the targets).
    pub fn draft_logits(mut self, draft: Logits<'a, Host>) -> Self {
        self.set_draft(draft);
        self
    }
}

impl<'a> VerifyArgs<'a, Device> {
    /// Arguments with device target logits.
    pub fn device(target_logits: Logits<'a, Device>, num_requests: usize, num_drafts: usize) -> Self {
        VerifyArgs::with_target(target_logits, num_requests, num_drafts)
    }
    /// Draft logits in device memory.
    pub fn draft_logits(mut self, draft: Logits<'a, Device>) -> Self {
        self.set_draft(draft);
        self
    }
}

buffer_setters! { VerifyArgs;
    inputs {
        /// `[num_requests]` drafts per request, in `[0, num_drafts]` (default: num_drafts).
        draft_counts: i32 => Requests,
        /// `[num_requests, num_drafts]` drafted token ids (required when num_drafts > 0).
        draft_tokens: i32 => RequestsTimesDrafts,
        /// `[num_requests]` temperatures.
        temperatures: f32 => Requests,
        /// `[num_requests]` top-k.
        top_ks: i32 => Requests,
        /// `[num_requests]` top-p.
        top_ps: f32 => Requests,
        /// `[num_requests]` min-p.
        min_ps: f32 => Requests,
        /// `[num_requests]` seeds.
        seeds: u64 => Requests,
        /// `[num_requests]` steps.
        steps: u32 => Requests,
        /// `[num_requests, allowed_mask_stride]` allowed-token bitmasks as in
        /// [`SampleArgs`](crate::SampleArgs), applied to each request's draft and target rows.
        allowed_token_masks: i32 => AllowedMasks,
    }
    outputs {
        /// Output `[num_requests]` (required): accepted drafts per request.
        accepted_counts: i32 => Requests,
        /// Output `[num_requests, num_drafts + 1]` (required): accepted drafts, the corrected or
        /// bonus token, then -1.
        out_tokens: i32 => RequestsTimesDraftsPlus1,
        /// Output `[num_requests, num_drafts + 1]`: target log-probabilities of those tokens.
        out_logprobs: f32 => RequestsTimesDraftsPlus1,
        /// Output `[num_requests]`: [`request_status`](crate::request_status) bits.
        request_status: i32 => Requests,
    }
}
