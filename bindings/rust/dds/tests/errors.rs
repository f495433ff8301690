//! Bad arguments: every failure is an `Err` with the status code and a message naming the
//! argument, from libdds itself or from the crate's own length checks; never a crash.
use dds::{DeviceSlice, Dtype, ErrorCode, Logits, ProbsOut, RawStream, SampleArgs, Sampler,
          SamplerConfig, StashArgs};

#[track_caller]
fn expect_err<T: std::fmt::Debug>(r: dds::Result<T>, code: ErrorCode, needle: &str) -> dds::Error {
    let e = r.expect_err("the call must fail");
    assert_eq!(e.code(), code, "code of `{}`", e);
    assert!(e.message().contains(needle), "message `{}` must name `{}`", e.message(), needle);
    e
}

#[test]
fn bad_configs() {
    expect_err(Sampler::new(&SamplerConfig::new(0)), ErrorCode::InvalidArgument, "vocab_size");
    expect_err(
        Sampler::new(&SamplerConfig::new(10).max_rows(0)),
        ErrorCode::InvalidArgument,
        "max_rows",
    );
    expect_err(
        Sampler::new(&SamplerConfig::new(10).max_stash_width(5000)),
        ErrorCode::InvalidArgument,
        "max_stash_width",
    );
    expect_err(
        Sampler::new(&SamplerConfig::new(10).num_threads(300)),
        ErrorCode::InvalidArgument,
        "num_threads",
    );
    expect_err(
        Sampler::new(&SamplerConfig::new(1usize << 40)),
        ErrorCode::InvalidArgument,
        "vocab_size",
    );
    if !dds::has_cuda() {
        let e = expect_err(Sampler::new(&SamplerConfig::new(10).cuda(0)), ErrorCode::NoDevice, "CUDA");
        assert!(e.to_string().starts_with("DDS_ERR_NO_DEVICE: "), "{}", e);
    }
}

#[test]
fn library_checks_name_the_argument() {
    let v = 10;
    let logits = vec![0f32; 4 * 16];
    let mut s = Sampler::new(&SamplerConfig::new(v).max_rows(3)).unwrap();
    let mut tok = vec![0i32; 4];
    let e = expect_err(
        s.sample(SampleArgs::new(Logits::f32(&logits), 2).row_stride(5).tokens(&mut tok)),
        ErrorCode::InvalidArgument,
        "row_stride",
    );
    assert!(e.message().starts_with("dds_sample: args->row_stride (5)"), "{}", e.message());
    assert!(e.to_string().starts_with("DDS_ERR_INVALID_ARGUMENT: "));
    expect_err(
        s.sample(SampleArgs::new(Logits::f32(&logits), 2).banned_token(10).tokens(&mut tok)),
        ErrorCode::InvalidArgument,
        "banned_token",
    );
    expect_err(
        s.sample(SampleArgs::new(Logits::f32(&logits), 4).tokens(&mut tok)),
        ErrorCode::Capacity,
        "max_rows",
    );
    // Offsets are per-request values, not host errors (docs/sampling.md §1): request 1's reversed
    // range owns no rows and is flagged.
    let mut rst = vec![0i32; 3];
    s.sample(
        SampleArgs::new(Logits::f32(&logits), 3)
            .row_offsets(&[0, 2, 1, 3])
            .tokens(&mut tok)
            .request_status(&mut rst),
    )
    .unwrap();
    assert_eq!(rst[1] & dds::request_status::BAD_ROW_OFFSETS, dds::request_status::BAD_ROW_OFFSETS, "{:?}", rst);
    // The last offset must be num_rows: request 1 (rows 1..2 of 3) is flagged.
    let mut rst = vec![0i32; 2];
    s.sample(
        SampleArgs::new(Logits::f32(&logits), 3)
            .row_offsets(&[0, 1, 2])
            .tokens(&mut tok)
            .request_status(&mut rst),
    )
    .unwrap();
    assert_eq!(rst, [0, dds::request_status::BAD_ROW_OFFSETS]);
    expect_err(
        s.sample(SampleArgs::new(Logits::f32(&logits), 2).temperature(-1.0).tokens(&mut tok)),
        ErrorCode::InvalidArgument,
        "temperature",
    );
    expect_err(
        s.sample(SampleArgs::new(Logits::f32(&logits), 2)),
        ErrorCode::NullPointer,
        "no output",
    );
    expect_err(
        s.sample(SampleArgs::new(Logits::f32(&logits), 2).num_requests(1).tokens(&mut tok)),
        ErrorCode::InvalidArgument,
        "row_offsets",
    );
    // The sampler still works after errors.
    s.sample(SampleArgs::new(Logits::f32(&logits), 2).tokens(&mut tok)).unwrap();
}

#[test]
fn length_checks_name_the_argument() {
    let v = 10;
    let logits = vec![0f32; 3 * v];
    let mut s = Sampler::cpu(v).unwrap();
    let mut tok = vec![0i32; 3];
    let mut short = vec![0i32; 2];
    let e = expect_err(
        s.sample(SampleArgs::new(Logits::f32(&logits), 3).tokens(&mut short)),
        ErrorCode::InvalidArgument,
        "args.tokens has 2 elements but needs at least 3 (num_rows)",
    );
    assert!(e.message().starts_with("dds::Sampler::sample: "));
    expect_err(
        s.sample(SampleArgs::new(Logits::f32(&logits[..29]), 3).tokens(&mut tok)),
        ErrorCode::InvalidArgument,
        "args.logits has 29 elements",
    );
    expect_err(
        s.sample(SampleArgs::new(Logits::f32(&logits), 3).row_stride(11).tokens(&mut tok)),
        ErrorCode::InvalidArgument,
        "(num_rows - 1) * row_stride + vocab_size",
    );
    expect_err(
        s.sample(SampleArgs::new(Logits::f32(&logits), 3).temperatures(&[1.0, 1.0]).tokens(&mut tok)),
        ErrorCode::InvalidArgument,
        "args.temperatures has 2 elements but needs at least 3 (num_requests)",
    );
    expect_err(
        s.sample(SampleArgs::new(Logits::f32(&logits), 3).row_offsets(&[0, 1, 3]).seeds(&[1]).tokens(&mut tok)),
        ErrorCode::InvalidArgument,
        "args.seeds",
    );
    expect_err(
        s.sample(SampleArgs::new(Logits::f32(&logits), 3).row_offsets(&[]).tokens(&mut tok)),
        ErrorCode::InvalidArgument,
        "row_offsets",
    );
    expect_err(
        s.sample(SampleArgs::new(Logits::f32(&logits), 3).num_requests(2).row_offsets(&[0, 3]).tokens(&mut tok)),
        ErrorCode::InvalidArgument,
        "args.row_offsets has 2 elements but needs at least 3 (num_requests + 1)",
    );
    let mut probs = vec![0f32; 3 * v - 1];
    expect_err(
        s.sample(SampleArgs::new(Logits::f32(&logits), 3).probs(ProbsOut::f32(&mut probs))),
        ErrorCode::InvalidArgument,
        "args.probs",
    );
    let mut st = vec![0i32; 1];
    expect_err(
        s.sample(SampleArgs::new(Logits::f32(&logits), 3).tokens(&mut tok).request_status(&mut st)),
        ErrorCode::InvalidArgument,
        "args.request_status",
    );
    // Guidance: explicit uncond_num_rows beyond the buffer; dtype mismatch.
    let u = vec![0f32; 2 * v];
    expect_err(
        s.sample(
            SampleArgs::new(Logits::f32(&logits), 3)
                .uncond_logits(Logits::f32(&u))
                .uncond_num_rows(3)
                .guidance_scale(1.0)
                .tokens(&mut tok),
        ),
        ErrorCode::InvalidArgument,
        "args.uncond_logits",
    );
    // Derived uncond_num_rows (2) < num_rows (3) without offsets: libdds says so.
    expect_err(
        s.sample(SampleArgs::new(Logits::f32(&logits), 3).uncond_logits(Logits::f32(&u)).guidance_scale(1.0).tokens(&mut tok)),
        ErrorCode::InvalidArgument,
        "uncond_num_rows",
    );
    let h = vec![0u16; 3 * v];
    expect_err(
        s.sample(SampleArgs::new(Logits::half(&h, Dtype::Bf16), 3).uncond_logits(Logits::f32(&logits)).tokens(&mut tok)),
        ErrorCode::InvalidArgument,
        "args.uncond_logits has dtype F32 but logits has dtype Bf16",
    );
    expect_err(
        s.sample(SampleArgs::new(Logits::half(&h, Dtype::F32), 3).tokens(&mut tok)),
        ErrorCode::InvalidArgument,
        "args.logits: a u16 buffer needs Dtype::Bf16 or Dtype::F16",
    );
    // num_rows 0 is a no-op, whatever the outputs.
    s.sample(SampleArgs::new(Logits::f32(&[]), 0).tokens(&mut [])).unwrap();
}

#[test]
fn stash_errors() {
    let v = 12;
    let logits = vec![0f32; 2 * v];
    let mut s = Sampler::cpu(v).unwrap(); // max_stash_width 20
    let mut ids = vec![0i32; 100];
    expect_err(
        s.stash(StashArgs::new(Logits::f32(&logits), 2).num_top(21).layout(2, 1).out_token_ids(&mut ids)),
        ErrorCode::Capacity,
        "max_stash_width",
    );
    expect_err(
        s.stash(StashArgs::new(Logits::f32(&logits), 2).num_top(3).out_token_ids(&mut ids)),
        ErrorCode::InvalidArgument,
        "num_slots",
    );
    expect_err(
        s.stash(StashArgs::new(Logits::f32(&logits), 2).num_top(3).layout(2, 1)),
        ErrorCode::NullPointer,
        "no output",
    );
    expect_err(
        s.stash(StashArgs::new(Logits::f32(&logits), 2).num_top(3).layout(5, 6).out_token_ids(&mut ids)),
        ErrorCode::InvalidArgument,
        "args.out_token_ids has 100 elements but needs at least 120 (num_slots * rows_per_slot * (num_top + 1))",
    );
    expect_err(
        s.stash(StashArgs::new(Logits::f32(&logits), 2).num_top(3).layout(2, 1).token_ids(&[1, 2, 3]).out_token_ids(&mut ids)),
        ErrorCode::InvalidArgument,
        "args.token_ids has 3 elements but needs at least 6 (num_requests * num_top)",
    );
    s.stash(StashArgs::new(Logits::f32(&logits), 2).num_top(3).layout(2, 1).out_token_ids(&mut ids)).unwrap();
}

#[test]
fn wrong_memory_space_is_refused_before_any_access() {
    let v = 8;
    let mut s = Sampler::cpu(v).unwrap();
    // Dangling "device" pointers: refused because the sampler is a CPU one, never dereferenced.
    let logits = unsafe { DeviceSlice::<f32>::from_address(0x1000, v) };
    let mut tok = unsafe { DeviceSlice::<i32>::from_address(0x2000, 1) };
    let r = unsafe {
        s.sample_device(SampleArgs::device(Logits::device_f32(&logits), 1).tokens(&mut tok), &RawStream::null())
    };
    expect_err(r, ErrorCode::InvalidArgument, "device buffers need a CUDA sampler");
    let mut ids = unsafe { DeviceSlice::<i32>::from_address(0x3000, 21) };
    let r = unsafe {
        s.stash_device(
            StashArgs::device(Logits::device_f32(&logits), 1).layout(1, 1).out_token_ids(&mut ids),
            &RawStream::null(),
        )
    };
    expect_err(r, ErrorCode::InvalidArgument, "device buffers need a CUDA sampler");
}

#[test]
fn error_codes_round_trip() {
    use dds::sys::dds_status;
    for raw in 1..=11u32 {
        let code = ErrorCode::from_raw(dds_status(raw)).unwrap();
        assert_eq!(code.to_raw(), dds_status(raw));
        assert!(code.name().starts_with("DDS_ERR_"), "{}", code.name());
    }
    assert_eq!(ErrorCode::from_raw(dds_status::DDS_OK), None);
    let unknown = ErrorCode::from_raw(dds_status(999)).unwrap();
    assert_eq!(unknown, ErrorCode::Unknown(999));
    assert_eq!(unknown.name(), "DDS_UNKNOWN_STATUS");
    assert_eq!(ErrorCode::InvalidArgument.name(), "DDS_ERR_INVALID_ARGUMENT");
}

#[test]
fn errors_are_per_thread_and_owned() {
    // The message is copied on the failing thread; another thread's errors do not leak into it.
    let e = Sampler::new(&SamplerConfig::new(0)).unwrap_err();
    std::thread::spawn(|| {
        let _ = Sampler::new(&SamplerConfig::new(10).max_requests(0));
    })
    .join()
    .unwrap();
    assert!(e.message().contains("vocab_size"));
    let boxed: Box<dyn std::error::Error + Send + Sync> = Box::new(e);
    assert!(boxed.to_string().contains("vocab_size"));
}
