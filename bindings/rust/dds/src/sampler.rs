//! `SamplerConfig` and `Sampler`, the owning handle of a `dds_sampler`.
use crate::args::{Device, Host, SampleArgs};
use crate::decoder::{RevealArgs, VerifyArgs};
use crate::device::Stream;
use crate::error::{check, Error, ErrorCode, Result};
use crate::stash::StashArgs;
use crate::sys;
use std::ptr::{self, NonNull};

/// Which backend a sampler runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Backend {
    /// The CPU reference backend: host buffers, the call completes before it returns.
    Cpu,
    /// The CUDA backend on the given device ordinal: device buffers, work queued on a stream.
    Cuda {
        /// CUDA device ordinal.
        device: i32,
    },
}

/// Configuration of a [`Sampler`] (`dds_sampler_config`): backend, vocabulary size and the
/// capacities that size the scratch workspace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SamplerConfig {
    backend: Backend,
    vocab_size: usize,
    max_rows: usize,
    max_requests: usize,
    max_stash_width: usize,
    debug_checks: bool,
    num_threads: usize,
}

impl SamplerConfig {
    /// A CPU-backend configuration for `vocab_size` columns with the library's default
    /// capacities (from `dds_sampler_config_init`).
    pub fn new(vocab_size: usize) -> SamplerConfig {
        let mut raw = std::mem::MaybeUninit::<sys::dds_sampler_config>::zeroed();
        let st = unsafe {
            sys::dds_sampler_config_init(
                raw.as_mut_ptr(),
                std::mem::size_of::<sys::dds_sampler_config>(),
            )
        };
        assert_eq!(st, sys::dds_status::DDS_OK, "dds_sampler_config_init failed");
        let raw = unsafe { raw.assume_init() };
        SamplerConfig {
            backend: Backend::Cpu,
            vocab_size,
            max_rows: raw.max_rows.max(0) as usize,
            max_requests: raw.max_requests.max(0) as usize,
            max_stash_width: raw.max_stash_width.max(0) as usize,
            debug_checks: raw.flags & sys::DDS_FLAG_DEBUG_CHECKS != 0,
            num_threads: raw.num_threads.max(0) as usize,
        }
    }
    /// Backend (default [`Backend::Cpu`]).
    pub fn backend(mut self, backend: Backend) -> Self {
        self.backend = backend;
        self
    }
    /// Shorthand for `backend(Backend::Cuda { device })`.
    pub fn cuda(self, device: i32) -> Self {
        self.backend(Backend::Cuda { device })
    }
    /// Most rows in one call (default 4096).
    pub fn max_rows(mut self, n: usize) -> Self {
        self.max_rows = n;
        self
    }
    /// Most requests in one call (default 1024).
    pub fn max_requests(mut self, n: usize) -> Self {
        self.max_requests = n;
        self
    }
    /// Largest stash `num_top` (default 20, at most 1024).
    pub fn max_stash_width(mut self, n: usize) -> Self {
        self.max_stash_width = n;
        self
    }
    /// CPU backend: threads that share a call's rows (0 = the library's default, 1 =
    /// single-threaded, at most 256). Outputs do not depend on it; the CUDA backend ignores it.
    pub fn num_threads(mut self, n: usize) -> Self {
        self.num_threads = n;
        self
    }
    /// `DDS_FLAG_DEBUG_CHECKS`: validate device-resident per-request arrays on the host (slow).
    pub fn debug_checks(mut self, on: bool) -> Self {
        self.debug_checks = on;
        self
    }
    /// The vocabulary size.
    pub fn vocab_size(&self) -> usize {
        self.vocab_size
    }

    fn to_raw(&self) -> Result<sys::dds_sampler_config> {
        let f = "dds::Sampler::new";
        let conv = |name: &str, v: usize| {
            i32::try_from(v).map_err(|_| {
                Error::invalid(format!("{}: config.{} ({}) does not fit in int32", f, name, v))
            })
        };
        let mut raw = std::mem::MaybeUninit::<sys::dds_sampler_config>::zeroed();
        check(unsafe {
            sys::dds_sampler_config_init(
                raw.as_mut_ptr(),
                std::mem::size_of::<sys::dds_sampler_config>(),
            )
        })?;
        let mut raw = unsafe { raw.assume_init() };
        match self.backend {
            Backend::Cpu => raw.backend = sys::dds_backend::DDS_BACKEND_CPU.0 as i32,
            Backend::Cuda { device } => {
                raw.backend = sys::dds_backend::DDS_BACKEND_CUDA.0 as i32;
                raw.device = device;
            }
        }
        raw.vocab_size = conv("vocab_size", self.vocab_size)?;
        raw.max_rows = conv("max_rows", self.max_rows)?;
        raw.max_requests = conv("max_requests", self.max_requests)?;
        raw.max_stash_width = conv("max_stash_width", self.max_stash_width)?;
        raw.num_threads = conv("num_threads", self.num_threads)?;
        if self.debug_checks {
            raw.flags |= sys::DDS_FLAG_DEBUG_CHECKS;
        } else {
            raw.flags &= !sys::DDS_FLAG_DEBUG_CHECKS;
        }
        Ok(raw)
    }
}

/// An owning handle of a `dds_sampler` (destroyed on drop).
///
/// # Threads
/// `Sampler` is [`Send`] but not [`Sync`]. The C contract: different samplers may be used from
/// different threads concurrently, one sampler by one thread at a time (it owns one scratch
/// workspace). Moving a sampler to another thread is therefore fine, sharing it is not; the
/// sampling calls take `&mut self`, so the compiler enforces the rule (wrap it in a `Mutex` to
/// share one). libdds keeps its error message in thread-local storage; this crate copies it into
/// the returned [`Error`] on the calling thread.
///
/// # Drop
/// Dropping destroys the sampler (`dds_destroy`). For a CUDA sampler, work queued with it must
/// have completed first (synchronise its streams); see [`Sampler::sample_device`].
#[derive(Debug)]
pub struct Sampler {
    raw: NonNull<sys::dds_sampler>,
    backend: Backend,
    vocab_size: usize,
}

// SAFETY: libdds allows a sampler to be used from any thread, one thread at a time; `Sampler`
// is not `Sync` and every call that uses the sampler takes `&mut self` (or `&self` for
// read-only queries that only read the immutable config).
unsafe impl Send for Sampler {}

impl Sampler {
    /// Creates a sampler (`dds_create`). Fails with [`ErrorCode::NoDevice`] for the CUDA backend
    /// where no device exists or libdds was built without CUDA.
    pub fn new(config: &SamplerConfig) -> Result<Sampler> {
        crate::check_version()?;
        let raw_config = config.to_raw()?;
        let mut out: *mut sys::dds_sampler = ptr::null_mut();
        check(unsafe { sys::dds_create(&raw_config, &mut out) })?;
        let raw = NonNull::new(out).ok_or_else(|| {
            Error::new(ErrorCode::Internal, "dds_create returned DDS_OK and NULL".into())
        })?;
        let mut sampler = Sampler { raw, backend: config.backend, vocab_size: config.vocab_size };
        // The backend the library reports (it decides which pointers the calls may take).
        let mut b: i32 = -1;
        check(unsafe { sys::dds_sampler_backend(sampler.raw.as_ptr(), &mut b) })?;
        sampler.backend = match b {
            b if b == sys::dds_backend::DDS_BACKEND_CPU.0 as i32 => Backend::Cpu,
            b if b == sys::dds_backend::DDS_BACKEND_CUDA.0 as i32 => {
                Backend::Cuda { device: raw_config.device }
            }
            other => {
                return Err(Error::new(
                    ErrorCode::Unsupported,
                    format!("dds::Sampler::new: libdds reports an unknown backend ({})", other),
                ))
            }
        };
        Ok(sampler)
    }

    /// A CPU sampler with default capacities.
    pub fn cpu(vocab_size: usize) -> Result<Sampler> {
        Sampler::new(&SamplerConfig::new(vocab_size))
    }

    /// The backend (as reported by `dds_sampler_backend`).
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// The vocabulary size (columns of every logits row).
    pub fn vocab_size(&self) -> usize {
        self.vocab_size
    }

    /// The raw handle, for calls through [`sys`](crate::sys). It stays owned by `self`.
    pub fn as_raw(&self) -> *mut sys::dds_sampler {
        self.raw.as_ptr()
    }

    fn require(&self, cuda: bool, func: &str) -> Result<()> {
        let is_cuda = matches!(self.backend, Backend::Cuda { .. });
        if is_cuda != cuda {
            let msg = if cuda {
                format!(
                    "{}: device buffers need a CUDA sampler, but this sampler uses the CPU \
                     backend (use the host API: SampleArgs::new / StashArgs::new and \
                     Sampler::sample / Sampler::stash)",
                    func
                )
            } else {
                format!(
                    "{}: host slices need a CPU sampler, but this sampler uses the CUDA backend \
                     (use device buffers: SampleArgs::device / StashArgs::device and \
                     Sampler::sample_device / Sampler::stash_device)",
                    func
                )
            };
            return Err(Error::invalid(msg));
        }
        Ok(())
    }

    /// Runs one sampling step on the CPU backend (`dds_sample`). Every buffer of `args` is
    /// checked against the call's sizes first; outputs are written when this returns `Ok`.
    pub fn sample(&mut self, args: SampleArgs<'_, Host>) -> Result<()> {
        let func = "dds::Sampler::sample";
        self.require(false, func)?;
        let raw = args.finish(func, self.vocab_size)?;
        // SAFETY: every pointer in `raw` comes from a slice borrowed by `args` (alive until the
        // end of this function) whose length was checked against what the call reads/writes.
        check(unsafe { sys::dds_sample(self.raw.as_ptr(), &raw, ptr::null_mut()) })
    }

    /// Writes the stash on the CPU backend (`dds_stash_logprobs`).
    pub fn stash(&mut self, args: StashArgs<'_, Host>) -> Result<()> {
        let func = "dds::Sampler::stash";
        self.require(false, func)?;
        let raw = args.finish(func, self.vocab_size)?;
        // SAFETY: as in `sample`.
        check(unsafe { sys::dds_stash_logprobs(self.raw.as_ptr(), &raw, ptr::null_mut()) })
    }

    /// Queues one sampling step on `stream` (CUDA backend). Returns once the work is queued; the
    /// host is not synchronised. Lengths are checked as for [`Sampler::sample`] and libdds
    /// checks that every pointer is device (or managed) memory of the sampler's device.
    ///
    /// # Safety
    /// The work runs after this returns, beyond the borrows of `args`. Until it completes (e.g.
    /// `cudaStreamSynchronize(stream)`, or later work on the same stream):
    /// * every buffer of `args` must stay allocated, inputs must not be written and outputs
    ///   must not be read or written by anyone else;
    /// * the stream must stay valid and the sampler must not be dropped;
    /// * the device-resident values (row offsets, per-request arrays) must be consistent with
    ///   the sizes given to `args` (libdds cannot check them without reading device memory;
    ///   [`SamplerConfig::debug_checks`] makes it check them on the host).
    pub unsafe fn sample_device<S: Stream + ?Sized>(
        &mut self,
        args: SampleArgs<'_, Device>,
        stream: &S,
    ) -> Result<()> {
        let func = "dds::Sampler::sample_device";
        self.require(true, func)?;
        let raw = args.finish(func, self.vocab_size)?;
        check(sys::dds_sample(self.raw.as_ptr(), &raw, stream.raw_stream()))
    }

    /// Queues the stash on `stream` (CUDA backend).
    ///
    /// # Safety
    /// As for [`Sampler::sample_device`].
    pub unsafe fn stash_device<S: Stream + ?Sized>(
        &mut self,
        args: StashArgs<'_, Device>,
        stream: &S,
    ) -> Result<()> {
        let func = "dds::Sampler::stash_device";
        self.require(true, func)?;
        let raw = args.finish(func, self.vocab_size)?;
        check(sys::dds_stash_logprobs(self.raw.as_ptr(), &raw, stream.raw_stream()))
    }
}

impl Sampler {
    /// Picks the positions to reveal on the CPU backend (`dds_reveal`).
    pub fn reveal(&mut self, args: RevealArgs<'_, Host>) -> Result<()> {
        let func = "dds::Sampler::reveal";
        self.require(false, func)?;
        let raw = args.finish(func)?;
        // SAFETY: as in `sample`.
        check(unsafe { sys::dds_reveal(self.raw.as_ptr(), &raw, ptr::null_mut()) })
    }

    /// Verifies speculative drafts on the CPU backend (`dds_verify_drafts`).
    pub fn verify_drafts(&mut self, args: VerifyArgs<'_, Host>) -> Result<()> {
        let func = "dds::Sampler::verify_drafts";
        self.require(false, func)?;
        let raw = args.finish(func, self.vocab_size)?;
        // SAFETY: as in `sample`.
        check(unsafe { sys::dds_verify_drafts(self.raw.as_ptr(), &raw, ptr::null_mut()) })
    }

    /// Queues `dds_reveal` on `stream` (CUDA backend).
    ///
    /// # Safety
    /// As for [`Sampler::sample_device`].
    pub unsafe fn reveal_device<S: Stream + ?Sized>(
        &mut self,
        args: RevealArgs<'_, Device>,
        stream: &S,
    ) -> Result<()> {
        let func = "dds::Sampler::reveal_device";
        self.require(true, func)?;
        let raw = args.finish(func)?;
        check(sys::dds_reveal(self.raw.as_ptr(), &raw, stream.raw_stream()))
    }

    /// Queues `dds_verify_drafts` on `stream` (CUDA backend; libdds may answer
    /// [`ErrorCode::Unsupported`] where its kernel has not landed).
    ///
    /// # Safety
    /// As for [`Sampler::sample_device`].
    pub unsafe fn verify_drafts_device<S: Stream + ?Sized>(
        &mut self,
        args: VerifyArgs<'_, Device>,
        stream: &S,
    ) -> Result<()> {
        let func = "dds::Sampler::verify_drafts_device";
        self.require(true, func)?;
        let raw = args.finish(func, self.vocab_size)?;
        check(sys::dds_verify_drafts(self.raw.as_ptr(), &raw, stream.raw_stream()))
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        // dds_destroy only fails on a bug (it catches everything); nothing to report from drop.
        unsafe {
            sys::dds_destroy(self.raw.as_ptr());
        }
    }
}
