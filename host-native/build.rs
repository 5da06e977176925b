//! Embeds the web page: every file under `../www` (the page and its wasm
//! package `www/pkg`, both in git) becomes a `(path, bytes, etag)` entry of
//! `$OUT_DIR/page.rs`, so the binary serves the page without reading disk.
//! Also rebuilds the crate when the PostgreSQL migrations change.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// What the page cannot load without.
const REQUIRED: [&str; 4] = [
    "index.html",
    "pkg/bubble_wasm.js",
    "pkg/bubble_wasm_bg.wasm",
    "pkg/host.mjs",
];

fn main() {
    // Read at run time: a build script's binary may be reused by another
    // checkout sharing the target directory, and `env!` would point it at
    // the checkout that compiled it.
    let manifest_dir = std::env::var_os("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR");
    let www = Path::new(&manifest_dir).join("../www");
    println!("cargo:rerun-if-changed={}", www.display());
    // `sqlx::migrate!` embeds these at build time.
    println!("cargo:rerun-if-changed=migrations");
    for file in REQUIRED {
        assert!(
            www.join(file).is_file(),
            "www/{file} is missing: run scripts/build-page-pkg.sh"
        );
    }
    let mut files = Vec::new();
    collect(&www, &www, &mut files);
    files.sort();
    let mut out =
        String::from("/// The page's files: (path under www/, bytes, ETag), sorted by path.\n");
    out.push_str("pub(crate) static FILES: &[(&str, &[u8], &str)] = &[\n");
    for (rel, abs) in &files {
        let bytes = std::fs::read(abs).unwrap_or_else(|e| panic!("read {}: {e}", abs.display()));
        writeln!(
            out,
            "    ({rel:?}, include_bytes!({:?}), \"\\\"{:016x}\\\"\"),",
            abs.display().to_string(),
            fnv1a(&bytes)
        )
        .expect("write to a String");
    }
    out.push_str("];\n");
    let dest = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR")).join("page.rs");
    std::fs::write(&dest, out).unwrap_or_else(|e| panic!("write {}: {e}", dest.display()));
}

/// Every file under `dir` but dotfiles, as (path relative to `root` with
/// `/` separators, absolute path).
fn collect(root: &Path, dir: &Path, files: &mut Vec<(String, PathBuf)>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("read {}: {e}", dir.display()));
    for entry in entries {
        let entry = entry.unwrap_or_else(|e| panic!("read {}: {e}", dir.display()));
        let path = entry.path();
        if entry.file_name().to_string_lossy().starts_with('.') {
            continue;
        }
        if path.is_dir() {
            collect(root, &path, files);
        } else {
            let rel = path
                .strip_prefix(root)
                .expect("under www/")
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join("/");
            files.push((rel, path));
        }
    }
}

/// 64-bit FNV-1a: a content tag for ETags, stable across builds.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}
