//! Safe Rust API of **dds**, the sampling step of discrete (masked) diffusion models.
//!
//! One call of [`Sampler::sample`] guides, bans, tempers, filters (top-k, top-p, min-p) and
//! samples one token per logits row with counter-based randomness, and reports the token's
//! log-probability, the argmax, confidence, margin, entropy and the probability rows.
//! [`Sampler::stash`] writes the top log-probabilities of converged requests. The decoder
//! primitives [`Sampler::reveal`] (which positions to commit) and [`Sampler::verify_drafts`]
//! (exact speculative verification) complete the step. The exact
//! semantics are those of the C library (`include/dds/dds.h`, `docs/sampling.md`); this crate
//! adds ownership, lifetimes and length checks on top of the raw bindings in [`sys`].
//!
//! # Quick start (CPU backend)
//! ```
//! use dds::{Logits, SampleArgs, Sampler, SamplerConfig};
//!
//! # fn main() -> dds::Result<()> {
//! let vocab = 8;
//! let mut sampler = Sampler::new(&SamplerConfig::new(vocab))?; // CPU backend by default
//! let logits = vec![0.5f32; 2 * vocab]; // 2 rows
//! let (mut tokens, mut conf) = (vec![0i32; 2], vec![0f32; 2]);
//! sampler.sample(
//!     SampleArgs::new(Logits::f32(&logits), 2)
//!         .temperature(0.8)
//!         .top_k(4)
//!         .seed(42)
//!         .tokens(&mut tokens)
//!         .confidence(&mut conf),
//! )?;
//! println!("{:?} {:?}", tokens, conf);
//! # Ok(())
//! # }
//! ```
//!
//! # Memory spaces
//! Argument builders are generic over where their buffers live: [`SampleArgs<'a, Host>`] (the
//! default) borrows slices and runs on a CPU sampler; [`SampleArgs<'a, Device>`] borrows device
//! buffers through the [`DevicePtr`] / [`DevicePtrMut`] traits and is queued on a CUDA sampler's
//! stream by the `unsafe` [`Sampler::sample_device`] (the work outlives the call: see its safety
//! section).
//!
//! Every buffer is checked against the sizes of the call (rows, requests, strides, vocabulary)
//! before the C library sees it, so a short slice is an [`Error`] naming the argument, never an
//! out-of-bounds access. The borrow of every buffer lasts as long as the argument builder, which
//! the sampling call consumes; outputs can be read once the call has returned.
//!
//! # Threads
//! [`Sampler`] is `Send` but not `Sync`: the C contract is that one sampler is used by one thread
//! at a time (it owns one scratch workspace). Move it between threads freely, or create one per
//! thread; the `&mut self` receivers of the sampling calls enforce the rule at compile time.
//!
//! ```compile_fail
//! fn needs_sync<T: Sync>() {}
//! needs_sync::<dds::Sampler>(); // Sampler is Send but not Sync
//! ```
//!
//! # Linking
//! `dds-sys` links `libdds` found through `DDS_LIB_DIR` (or `dds.pc`); at run time the loader must
//! find `libdds.so.0`, e.g. `LD_LIBRARY_PATH=$DDS_LIB_DIR cargo test`.
#![warn(missing_docs)]

pub use dds_sys as sys;

mod args;
mod decoder;
mod device;
mod error;
pub mod half;
mod sampler;
mod stash;

pub use args::{Device, Host, Logits, ProbsOut, SampleArgs, Space};
pub use decoder::{RevealArgs, RevealPolicy, VerifyArgs};
pub use device::{DevicePtr, DevicePtrMut, DeviceSlice, RawStream, Stream};
pub use error::{Error, ErrorCode, Result};
pub use sampler::{Backend, Sampler, SamplerConfig};
pub use stash::{StashArgs, StashMode};

use std::ffi::CStr;

/// Element type of logits and probability buffers (`dds_dtype`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dtype {
    /// IEEE binary32, as `f32`.
    F32,
    /// bfloat16, stored as the raw bits in `u16` (see [`half`]).
    Bf16,
    /// IEEE binary16, stored as the raw bits in `u16` (see [`half`]).
    F16,
}

impl Dtype {
    /// The C enum value (`DDS_DTYPE_*`).
    pub fn to_raw(self) -> i32 {
        let v = match self {
            Dtype::F32 => sys::dds_dtype::DDS_DTYPE_F32,
            Dtype::Bf16 => sys::dds_dtype::DDS_DTYPE_BF16,
            Dtype::F16 => sys::dds_dtype::DDS_DTYPE_F16,
        };
        v.0 as i32
    }
    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            Dtype::F32 => 4,
            Dtype::Bf16 | Dtype::F16 => 2,
        }
    }
}

/// Which distribution the statistics (logprob, confidence, margin, entropy, probs) describe
/// (`dds_stats_mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Stats {
    /// After guidance, ban, temperature and filters: the distribution that was sampled.
    #[default]
    Processed,
    /// After guidance and ban only (temperature 1, no filters): what LLaDA / Fast-dLLM rank
    /// positions by, and the only useful ranking under greedy decoding.
    Guided,
}

impl Stats {
    /// The C enum value (`DDS_STATS_*`).
    pub fn to_raw(self) -> i32 {
        let v = match self {
            Stats::Processed => sys::dds_stats_mode::DDS_STATS_PROCESSED,
            Stats::Guided => sys::dds_stats_mode::DDS_STATS_GUIDED,
        };
        v.0 as i32
    }
}

/// Bits of the per-request status array (`request_status` outputs). A set bit means a value was
/// out of range and was replaced by the documented rule; the call still succeeded.
pub mod request_status {
    use dds_sys as sys;
    /// Temperature NaN, negative or infinite: 1.0 used.
    pub const BAD_TEMPERATURE: i32 = sys::DDS_REQ_BAD_TEMPERATURE as i32;
    /// Guidance scale NaN or infinite: 0 (no guidance) used.
    pub const BAD_GUIDANCE: i32 = sys::DDS_REQ_BAD_GUIDANCE as i32;
    /// top-k negative: 0 (off) used.
    pub const BAD_TOP_K: i32 = sys::DDS_REQ_BAD_TOP_K as i32;
    /// top-p NaN: 1 (off) used.
    pub const BAD_TOP_P: i32 = sys::DDS_REQ_BAD_TOP_P as i32;
    /// min-p NaN or negative: 0 (off) used.
    pub const BAD_MIN_P: i32 = sys::DDS_REQ_BAD_MIN_P as i32;
    /// Unconditional rows outside `[0, uncond_num_rows)`: the request was not guided.
    pub const BAD_UNCOND_ROWS: i32 = sys::DDS_REQ_BAD_UNCOND_ROWS as i32;
    /// A row had no finite, unbanned column: token 0 written.
    pub const EMPTY_ROW: i32 = sys::DDS_REQ_EMPTY_ROW as i32;
    /// Stash: slot outside `[0, num_slots)`: the request was skipped.
    pub const BAD_SLOT: i32 = sys::DDS_REQ_BAD_SLOT as i32;
    /// Reveal: unknown policy, TopN used.
    pub const BAD_POLICY: i32 = sys::DDS_REQ_BAD_POLICY as i32;
    /// Reveal: a row's position is outside `[0, canvas_length)`.
    pub const BAD_POSITION: i32 = sys::DDS_REQ_BAD_POSITION as i32;
    /// CUDA reveal: a request with more than 4096 rows was not processed.
    pub const TOO_MANY_ROWS: i32 = sys::DDS_REQ_TOO_MANY_ROWS as i32;
    /// Row offsets of the request reversed or outside `[0, num_rows]` (or a bad first / last
    /// offset): the request owns no rows (docs/sampling.md §1).
    pub const BAD_ROW_OFFSETS: i32 = sys::DDS_REQ_BAD_ROW_OFFSETS as i32;
    /// Verify: draft count outside `[0, num_drafts]`: clamped.
    pub const BAD_DRAFT_COUNT: i32 = sys::DDS_REQ_BAD_DRAFT_COUNT as i32;
    /// Reveal ENTROPY_BOUND: a NaN or negative entropy bound; 0 used.
    pub const BAD_ENTROPY_BOUND: i32 = sys::DDS_REQ_BAD_ENTROPY_BOUND as i32;
    /// Stash / verify: an input token id outside `[0, vocab_size)` (stash: written as given with
    /// value -inf, rank 0; verify: the draft is rejected).
    pub const BAD_TOKEN_ID: i32 = sys::DDS_REQ_BAD_TOKEN_ID as i32;
    /// Stash: `num_token_ids` outside `[0, num_top]`: clamped.
    pub const BAD_NUM_TOKEN_IDS: i32 = sys::DDS_REQ_BAD_NUM_TOKEN_IDS as i32;
    /// Reveal: a NaN threshold, a NaN / infinite / negative factor, or a NaN / negative position
    /// temperature (used as docs/sampling.md §1 says).
    pub const BAD_REVEAL_PARAM: i32 = sys::DDS_REQ_BAD_REVEAL_PARAM as i32;
}

/// Version of the loaded libdds as `(major, minor, patch)`.
pub fn version() -> (u32, u32, u32) {
    let n = unsafe { sys::dds_version_number() } as u32;
    (n / 1_000_000, n / 1000 % 1000, n % 1000)
}

/// Version string of the loaded libdds, e.g. `"0.1.0"`.
pub fn version_string() -> &'static str {
    // Static storage in the library, valid for the life of the process.
    unsafe { CStr::from_ptr(sys::dds_version_string()) }.to_str().unwrap_or("?")
}

/// `true` if the loaded libdds was built with the CUDA backend.
pub fn has_cuda() -> bool {
    unsafe { sys::dds_has_cuda() != 0 }
}

/// Checks that the loaded libdds has the major version these bindings were generated for
/// (done by [`Sampler::new`]).
pub fn check_version() -> Result<()> {
    let (major, _, _) = version();
    if major != sys::DDS_VERSION_MAJOR {
        return Err(Error::new(
            ErrorCode::Unsupported,
            format!(
                "dds: the loaded libdds is version {} but these bindings were generated for major \
                 version {} (include/dds/dds.h {}.{}.{})",
                version_string(),
                sys::DDS_VERSION_MAJOR,
                sys::DDS_VERSION_MAJOR,
                sys::DDS_VERSION_MINOR,
                sys::DDS_VERSION_PATCH
            ),
        ));
    }
    Ok(())
}
