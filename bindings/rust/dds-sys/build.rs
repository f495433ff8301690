//! Finds libdds and tells cargo to link it (dynamically). No crates: the pkg-config file is read
//! by hand.
//!
//! Order:
//! 1. `DDS_LIB_DIR`: the directory holding `libdds.so` (a CMake build directory such as
//!    `build/`, or an install's `lib/`).
//! 2. `dds.pc`: `DDS_PC_FILE` (a path), else the first `dds.pc` in the directories of
//!    `PKG_CONFIG_PATH`, then `PKG_CONFIG_LIBDIR` (or the usual system directories). Its
//!    `libdir` (or the `-L` of its `Libs:` line) is used.
//!
//! Otherwise the build fails with a message that says what to set.
use std::collections::HashMap;
use std::env;
use std::fs;
use std::path::{Path, PathBuf};

fn main() {
    for v in ["DDS_LIB_DIR", "DDS_PC_FILE", "PKG_CONFIG_PATH", "PKG_CONFIG_LIBDIR"] {
        println!("cargo:rerun-if-env-changed={}", v);
    }
    println!("cargo:rerun-if-changed=build.rs");

    let lib_dir = match env::var_os("DDS_LIB_DIR") {
        Some(dir) if !dir.is_empty() => {
            let dir = PathBuf::from(dir);
            if !has_libdds(&dir) {
                fail(&format!(
                    "DDS_LIB_DIR is set to `{}`, but that directory holds no libdds.so. Set DDS_LIB_DIR to the directory that holds libdds.so: \
                     a CMake build directory (e.g. DDS_LIB_DIR=/path/to/dds/build after `cmake \
                     -S /path/to/dds -B /path/to/dds/build && cmake --build /path/to/dds/build`) \
                     or the lib/ directory of an install.",
                    dir.display()
                ));
            }
            dir
        }
        _ => match from_pkg_config() {
            Ok(dir) => dir,
            Err(why) => fail(&format!(
                "cannot find libdds. Set DDS_LIB_DIR to the directory that holds libdds.so, \
                 e.g.\n\n    DDS_LIB_DIR=/path/to/dds/build cargo build\n\n(after building \
                 dds with `cmake -S /path/to/dds -B /path/to/dds/build && cmake --build \
                 /path/to/dds/build`), or install dds and add the directory holding dds.pc to \
                 PKG_CONFIG_PATH (or point DDS_PC_FILE at dds.pc).\npkg-config lookup: {}",
                why
            )),
        },
    };
    let lib_dir = lib_dir.canonicalize().unwrap_or(lib_dir);
    println!("cargo:rerun-if-changed={}", lib_dir.join("libdds.so").display());
    println!("cargo:rustc-link-search=native={}", lib_dir.display());
    println!("cargo:rustc-link-lib=dylib=dds");
    // Exposed to dependents' build scripts as DEP_DDS_LIB_DIR (this crate has `links = "dds"`).
    println!("cargo:lib_dir={}", lib_dir.display());
}

fn fail(msg: &str) -> ! {
    eprintln!("\nerror: dds-sys: {}\n", msg);
    std::process::exit(1);
}

/// The linker needs `libdds.so` (the development symlink), not only `libdds.so.<major>`.
fn has_libdds(dir: &Path) -> bool {
    dir.join("libdds.so").exists()
}

fn pc_search_dirs() -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    for var in ["PKG_CONFIG_PATH", "PKG_CONFIG_LIBDIR"] {
        if let Some(v) = env::var_os(var) {
            dirs.extend(env::split_paths(&v).filter(|p| !p.as_os_str().is_empty()));
        }
    }
    if env::var_os("PKG_CONFIG_LIBDIR").is_none() {
        for d in [
            "/usr/local/lib/pkgconfig",
            "/usr/local/lib64/pkgconfig",
            "/usr/local/lib/x86_64-linux-gnu/pkgconfig",
            "/usr/local/lib/aarch64-linux-gnu/pkgconfig",
            "/usr/local/share/pkgconfig",
            "/usr/lib/x86_64-linux-gnu/pkgconfig",
            "/usr/lib/aarch64-linux-gnu/pkgconfig",
            "/usr/lib64/pkgconfig",
            "/usr/lib/pkgconfig",
            "/usr/share/pkgconfig",
        ] {
            dirs.push(PathBuf::from(d));
        }
    }
    dirs
}

/// Reads a .pc file: `name=value` variables (with `${var}` references and the built-in
/// `pcfiledir`), then the `libdir` variable or the first `-L` of `Libs:`.
fn from_pkg_config() -> Result<PathBuf, String> {
    let pc = match env::var_os("DDS_PC_FILE") {
        Some(p) if !p.is_empty() => {
            let p = PathBuf::from(p);
            if !p.is_file() {
                return Err(format!("DDS_PC_FILE=`{}` is not a file", p.display()));
            }
            p
        }
        _ => {
            let dirs = pc_search_dirs();
            match dirs.iter().map(|d| d.join("dds.pc")).find(|p| p.is_file()) {
                Some(p) => p,
                None => {
                    let list: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
                    return Err(format!("no dds.pc in {}", list.join(":")));
                }
            }
        }
    };
    println!("cargo:rerun-if-changed={}", pc.display());
    let text = fs::read_to_string(&pc).map_err(|e| format!("{}: {}", pc.display(), e))?;
    let mut vars: HashMap<String, String> = HashMap::new();
    let pcfiledir = pc.parent().unwrap_or(Path::new(".")).to_string_lossy().into_owned();
    vars.insert("pcfiledir".into(), pcfiledir);
    let mut libs_line = None;
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if let Some(rest) = line.strip_prefix("Libs:") {
            libs_line = Some(expand(rest.trim(), &vars));
            continue;
        }
        if let Some(eq) = line.find('=') {
            let (name, value) = (&line[..eq], &line[eq + 1..]);
            if !name.contains(':') && !name.contains(' ') {
                let v = expand(value.trim(), &vars);
                vars.insert(name.trim().to_string(), v);
            }
        }
    }
    let mut candidates = Vec::new();
    if let Some(libdir) = vars.get("libdir") {
        candidates.push(PathBuf::from(libdir));
    }
    if let Some(libs) = &libs_line {
        for tok in libs.split_whitespace() {
            if let Some(d) = tok.strip_prefix("-L") {
                candidates.push(PathBuf::from(d));
            }
        }
    }
    for c in &candidates {
        if has_libdds(c) {
            return Ok(c.clone());
        }
    }
    Err(format!(
        "{} names {:?}, but none holds libdds.so",
        pc.display(),
        candidates.iter().map(|c| c.display().to_string()).collect::<Vec<_>>()
    ))
}

fn expand(s: &str, vars: &HashMap<String, String>) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        match rest[start + 2..].find('}') {
            Some(end) => {
                let name = &rest[start + 2..start + 2 + end];
                out.push_str(vars.get(name).map(String::as_str).unwrap_or(""));
                rest = &rest[start + 2 + end + 1..];
            }
            None => {
                out.push_str(&rest[start..]);
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}
