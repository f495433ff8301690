//! `StashArgs`: the builder of `dds_stash_args`.
use crate::args::{buffer_setters, check_bufs, check_len, mask_words, matrix_len, requests_of, to_i32,
                  to_i64, Bufs, Device, Host, Logits, Sizes, Space};
use crate::error::{Error, Result};
use crate::{sys, Dtype};
use std::marker::PhantomData;

/// What the stash writes as values: log-probabilities or the tempered logits themselves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum StashMode {
    /// `log_softmax(l / T)` over the finite columns (`logits_mode = 0`).
    #[default]
    LogProbs,
    /// The tempered logits `l / T` (`logits_mode = 1`).
    TemperedLogits,
}

/// Arguments of [`Sampler::stash`](crate::Sampler::stash) (`dds_stash_logprobs`): the top
/// log-probabilities of converged requests, written per slot.
///
/// For each request `r` that is kept, for its first `num_valid[r]` rows `j`, entry `e` of output
/// row `(slot, j)` is at index `(slot * rows_per_slot + j) * (num_top + 1) + e`: entry 0 is the
/// committed token (or the argmax), entries `1..=num_top` the request's own `token_ids` or its
/// top-`num_top` tokens; padding is token 0 at `-inf`, rank 0. Outputs are
/// `[num_slots, rows_per_slot, num_top + 1]`; requests not kept are not touched.
///
/// ```
/// # use dds::{Logits, StashArgs};
/// let logits = vec![0f32; 4 * 16]; // 4 rows, V = 16
/// let offsets = [0, 3, 4];
/// let keep = [1u8, 0]; // stash request 0 only
/// let mut ids = vec![0i32; 2 * 3 * 6]; // 2 slots x 3 rows x (5 + 1)
/// let args = StashArgs::new(Logits::f32(&logits), 4)
///     .row_offsets(&offsets)
///     .keep(&keep)
///     .num_top(5)
///     .layout(2, 3)
///     .out_token_ids(&mut ids);
/// # drop(args);
/// ```
#[derive(Debug)]
pub struct StashArgs<'a, S: Space = Host> {
    pub(crate) raw: sys::dds_stash_args,
    pub(crate) bufs: Bufs,
    num_rows: usize,
    num_requests: Option<usize>,
    row_stride: usize,
    logits_len: usize,
    num_top: usize,
    num_slots: usize,
    rows_per_slot: usize,
    bad: Option<String>,
    _m: PhantomData<(&'a mut [u8], S)>,
}

impl<'a, S: Space> StashArgs<'a, S> {
    fn with_logits(logits: Logits<'a, S>, num_rows: usize) -> Self {
        let mut raw = std::mem::MaybeUninit::<sys::dds_stash_args>::zeroed();
        let st = unsafe {
            sys::dds_stash_args_init(raw.as_mut_ptr(), std::mem::size_of::<sys::dds_stash_args>())
        };
        assert_eq!(st, sys::dds_status::DDS_OK, "dds_stash_args_init failed");
        let mut raw = unsafe { raw.assume_init() };
        raw.logits = logits.ptr;
        raw.dtype = logits.dtype.to_raw();
        let num_top = raw.num_top.max(0) as usize;
        StashArgs {
            raw,
            bufs: Bufs::default(),
            num_rows,
            num_requests: None,
            row_stride: 0,
            logits_len: logits.len,
            num_top,
            num_slots: 0,
            rows_per_slot: 0,
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
    /// Default temperature (1; T <= 0 is treated as 1).
    pub fn temperature(mut self, t: f32) -> Self {
        self.raw.temperature = t;
        self
    }
    /// Entries per row beyond entry 0 (default 20; at most the sampler's `max_stash_width`).
    pub fn num_top(mut self, n: usize) -> Self {
        self.num_top = n;
        self
    }
    /// Log-probabilities (default) or tempered logits.
    pub fn mode(mut self, mode: StashMode) -> Self {
        self.raw.logits_mode = match mode {
            StashMode::LogProbs => 0,
            StashMode::TemperedLogits => 1,
        };
        self
    }
    /// int32 words between requests' allowed-token masks (default 0 = ceil(vocab_size / 32)).
    pub fn allowed_mask_stride(mut self, words: usize) -> Self {
        self.raw.allowed_mask_stride = words.min(i64::MAX as usize) as i64;
        self
    }
    /// Output layout: `num_slots` slots of `rows_per_slot` rows (both required, >= 1).
    pub fn layout(mut self, num_slots: usize, rows_per_slot: usize) -> Self {
        self.num_slots = num_slots;
        self.rows_per_slot = rows_per_slot;
        self
    }

    pub(crate) fn finish(&self, func: &str, vocab: usize) -> Result<sys::dds_stash_args> {
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
        raw.num_top = to_i32(func, "num_top", self.num_top)?;
        raw.num_slots = to_i32(func, "num_slots", self.num_slots)?;
        raw.rows_per_slot = to_i32(func, "rows_per_slot", self.rows_per_slot)?;
        let overflow = || Error::invalid(format!("{}: args output size overflows usize", func));
        let out_len = self
            .num_slots
            .checked_mul(self.rows_per_slot)
            .and_then(|x| x.checked_mul(self.num_top + 1))
            .ok_or_else(overflow)?;
        let sizes = Sizes {
            rows,
            requests,
            num_top: Some(self.num_top),
            stash_out: Some(out_len),
            drafts: None,
            mask_words: mask_words(func, requests, raw.allowed_mask_stride, vocab)?,
        };
        check_bufs(func, &self.bufs, &sizes)?;
        Ok(raw)
    }

    /// Element type of the logits.
    pub fn dtype(&self) -> Dtype {
        match self.raw.dtype {
            1 => Dtype::Bf16,
            2 => Dtype::F16,
            _ => Dtype::F32,
        }
    }
}

impl<'a> StashArgs<'a, Host> {
    /// Arguments for `num_rows` rows of host `logits`.
    pub fn new(logits: Logits<'a, Host>, num_rows: usize) -> Self {
        StashArgs::with_logits(logits, num_rows)
    }
}

impl<'a> StashArgs<'a, Device> {
    /// Arguments for `num_rows` rows of device `logits`.
    pub fn device(logits: Logits<'a, Device>, num_rows: usize) -> Self {
        StashArgs::with_logits(logits, num_rows)
    }
}

buffer_setters! { StashArgs;
    inputs {
        /// `[num_requests + 1]` row offsets (default: one row per request).
        row_offsets: i32 => RequestsPlus1,
        /// `[num_requests]` nonzero = stash this request (default: all).
        keep: u8 => Requests,
        /// `[num_requests]` output slot of each request (default: r).
        slots: i32 => Requests,
        /// `[num_requests]` rows to write per request (default: all rows).
        num_valid: i32 => Requests,
        /// `[num_requests]` temperatures.
        temperatures: f32 => Requests,
        /// `[num_rows]` entry-0 token of each row (default: the argmax).
        committed_tokens: i32 => Rows,
        /// `[num_requests * num_top]` each request's own token ids (default: its top tokens).
        token_ids: i32 => RequestsTimesTop,
        /// `[num_requests]` ids used per request, 0..=num_top (default with `token_ids`: num_top).
        num_token_ids: i32 => Requests,
        /// `[num_requests, allowed_mask_stride]` allowed-token bitmasks as in
        /// [`SampleArgs`](crate::SampleArgs): a disallowed token is -inf.
        allowed_token_masks: i32 => AllowedMasks,
    }
    outputs {
        /// Output `[num_slots, rows_per_slot, num_top + 1]`: token ids.
        out_token_ids: i32 => StashOut,
        /// Output `[num_slots, rows_per_slot, num_top + 1]`: log-probs (or tempered logits).
        out_logprobs: f32 => StashOut,
        /// Output `[num_slots, rows_per_slot, num_top + 1]`: ranks (1 = most likely).
        out_ranks: i32 => StashOut,
        /// Output `[num_requests]`: [`request_status`](crate::request_status) bits.
        request_status: i32 => Requests,
    }
}
