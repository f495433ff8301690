//! Only the `cuda-tests` feature needs anything here: the GPU integration test calls the CUDA
//! runtime (cudaMalloc, cudaMemcpy, ...) through a minimal FFI of its own, so the test binaries
//! link `libcudart_static.a` (plus dl, rt, pthread), or the shared libcudart with
//! `DDS_CUDART=shared`.
use std::env;
use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    for v in ["CUDA_HOME", "CUDA_PATH", "DDS_CUDART"] {
        println!("cargo:rerun-if-env-changed={}", v);
    }
    if env::var_os("CARGO_FEATURE_CUDA_TESTS").is_none() {
        return;
    }
    let home = env::var_os("CUDA_HOME")
        .or_else(|| env::var_os("CUDA_PATH"))
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/local/cuda"));
    let lib = ["lib64", "lib", "targets/x86_64-linux/lib", "targets/sbsa-linux/lib"]
        .iter()
        .map(|d| home.join(d))
        .find(|d| d.join("libcudart_static.a").exists() || d.join("libcudart.so").exists())
        .unwrap_or_else(|| {
            panic!(
                "dds: the cuda-tests feature needs the CUDA runtime: no libcudart_static.a or \
                 libcudart.so under {}/{{lib64,lib}}. Set CUDA_HOME to the CUDA toolkit \
                 (e.g. CUDA_HOME=/usr/local/cuda).",
                home.display()
            )
        });
    let shared = env::var("DDS_CUDART").map(|v| v == "shared").unwrap_or(false)
        || !lib.join("libcudart_static.a").exists();
    println!("cargo:rustc-link-arg-tests=-L{}", lib.display());
    if shared {
        println!("cargo:rustc-link-arg-tests=-lcudart");
    } else {
        println!("cargo:rustc-link-arg-tests=-l:libcudart_static.a");
        println!("cargo:rustc-link-arg-tests=-ldl");
        println!("cargo:rustc-link-arg-tests=-lrt");
        println!("cargo:rustc-link-arg-tests=-lpthread");
    }
}
