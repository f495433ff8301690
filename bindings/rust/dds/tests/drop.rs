//! Drop safety and threads: samplers are destroyed exactly once, on any thread, after errors and
//! during unwinding; `Sampler` is `Send` and works when moved between threads.
use dds::{Logits, SampleArgs, Sampler, SamplerConfig};
use std::sync::{Arc, Mutex};

fn tokens(s: &mut Sampler, logits: &[f32], rows: usize, seed: u64) -> Vec<i32> {
    let mut t = vec![0i32; rows];
    s.sample(SampleArgs::new(Logits::f32(logits), rows).seed(seed).tokens(&mut t)).unwrap();
    t
}

fn logits(v: usize, rows: usize) -> Vec<f32> {
    (0..v * rows).map(|i| ((i * 37 % 101) as f32) * 0.05).collect()
}

#[test]
fn create_and_drop_many() {
    for i in 0..2000 {
        let s = Sampler::new(&SamplerConfig::new(1 + i % 300).max_rows(1 + i % 7)).unwrap();
        drop(s);
    }
    // Failed creations own nothing.
    for _ in 0..100 {
        assert!(Sampler::new(&SamplerConfig::new(0)).is_err());
    }
}

#[test]
fn drop_after_errors_and_reuse() {
    let v = 50;
    let l = logits(v, 2);
    let mut s = Sampler::cpu(v).unwrap();
    let mut short = [0i32; 1];
    assert!(s.sample(SampleArgs::new(Logits::f32(&l), 2).tokens(&mut short)).is_err());
    assert!(s.sample(SampleArgs::new(Logits::f32(&l), 2).row_stride(1)).is_err());
    let a = tokens(&mut s, &l, 2, 1);
    let b = tokens(&mut s, &l, 2, 1);
    assert_eq!(a, b);
    drop(s);
}

#[test]
fn moved_to_threads_and_dropped_there() {
    let v = 300;
    let l = Arc::new(logits(v, 4));
    let mut main = Sampler::cpu(v).unwrap();
    let want = tokens(&mut main, &l, 4, 9);
    let handles: Vec<_> = (0..4)
        .map(|_| {
            let l = Arc::clone(&l);
            let mut s = Sampler::cpu(v).unwrap(); // created here, moved (Send) into the thread
            std::thread::spawn(move || {
                let mut out = Vec::new();
                for _ in 0..50 {
                    out = tokens(&mut s, &l, 4, 9);
                }
                out // s dropped on this thread
            })
        })
        .collect();
    for h in handles {
        assert_eq!(h.join().unwrap(), want);
    }
    // A sampler moved out and back.
    let back = std::thread::spawn(move || {
        let t = tokens(&mut main, &Arc::new(logits(v, 4)), 4, 9);
        (main, t)
    })
    .join()
    .unwrap();
    assert_eq!(back.1, want);
    drop(back.0);
}

#[test]
fn shared_through_a_mutex() {
    let v = 64;
    let s = Arc::new(Mutex::new(Sampler::cpu(v).unwrap()));
    let l = Arc::new(logits(v, 3));
    let hs: Vec<_> = (0..4)
        .map(|k| {
            let (s, l) = (Arc::clone(&s), Arc::clone(&l));
            std::thread::spawn(move || {
                for _ in 0..100 {
                    let mut t = vec![0i32; 3];
                    s.lock().unwrap().sample(SampleArgs::new(Logits::f32(&l), 3).seed(k).tokens(&mut t)).unwrap();
                }
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
}

#[test]
fn dropped_during_unwinding() {
    let r = std::panic::catch_unwind(|| {
        let v = 16;
        let l = logits(v, 1);
        let mut s = Sampler::cpu(v).unwrap();
        let mut t = [0i32; 1];
        s.sample(SampleArgs::new(Logits::f32(&l), 1).tokens(&mut t)).unwrap();
        panic!("unwinding with a live sampler");
    });
    assert!(r.is_err());
}

#[test]
fn sampler_is_send() {
    fn is_send<T: Send>() {}
    is_send::<Sampler>();
    is_send::<dds::Error>();
}
