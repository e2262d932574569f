//! Build every plugin in `plugins/` and `plugins/examples/` and probe in `tests/probes/`
//! for wasm32-wasip2, so the tests run real components. They go to
//! `target/wasm-plugins/` (a separate target directory: the outer cargo holds the lock on
//! its own).

use std::path::{Path, PathBuf};
use std::process::Command;

const TARGET: &str = "wasm32-wasip2";

fn main() {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let root = manifest.parent().expect("tests/ is inside the workspace").to_owned();
    for dir in ["wit", "guest-sdk", "plugins", "tests/probes"] {
        println!("cargo:rerun-if-changed={}", root.join(dir).display());
    }
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed={}", root.join(".cargo/config.toml").display());

    let mut packages = crates_in(&root.join("plugins"));
    let reference: Vec<String> = packages.iter().map(|(_, lib)| lib.clone()).collect();
    // The gallery of LiberTEM's documented UDFs (plugins/examples/*/).
    let examples = crates_in(&root.join("plugins/examples"));
    let example_names: Vec<String> = examples.iter().map(|(_, lib)| lib.clone()).collect();
    println!("cargo:rustc-env=UDF_EXAMPLE_PLUGIN_NAMES={}", example_names.join(","));
    packages.extend(examples);
    packages.extend(crates_in(&root.join("tests/probes")));
    let target_dir = root.join("target").join("wasm-plugins");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(&root).args(["build", "--release", "--target", TARGET, "--target-dir"]).arg(&target_dir);
    for (package, _) in &packages {
        cmd.args(["-p", package]);
    }
    // The outer build's flags are for the host; the wasm flags come from .cargo/config.toml.
    for var in
        ["CARGO_ENCODED_RUSTFLAGS", "RUSTFLAGS", "CARGO_TARGET_DIR", "CARGO_BUILD_TARGET", "RUSTC_WORKSPACE_WRAPPER"]
    {
        cmd.env_remove(var);
    }
    let status = cmd.status().expect("cannot run cargo to build the wasm plugins");
    if !status.success() {
        let installed = Command::new("rustup")
            .args(["target", "list", "--installed"])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).contains(TARGET))
            .unwrap_or(true);
        if !installed {
            panic!(
                "the {TARGET} Rust target is not installed; run `rustup target add {TARGET} wasm32-unknown-unknown` \
                 (scripts/setup.sh does this)"
            );
        }
        panic!("building the wasm plugins failed (see the cargo output above)");
    }
    let out = target_dir.join(TARGET).join("release");
    println!("cargo:rustc-env=UDF_PLUGIN_DIR={}", out.display());
    let names: Vec<&str> = packages.iter().map(|(_, lib)| lib.as_str()).collect();
    println!("cargo:rustc-env=UDF_PLUGIN_NAMES={}", names.join(","));
    // The reference plugins (plugins/), which must pass the conformance kit.
    println!("cargo:rustc-env=UDF_REFERENCE_PLUGIN_NAMES={}", reference.join(","));
}

/// `(package name, lib name)` of every crate directly under `dir`.
fn crates_in(dir: &Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else { return out };
    let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    paths.sort();
    for path in paths {
        let Ok(text) = std::fs::read_to_string(path.join("Cargo.toml")) else { continue };
        let mut package = None;
        let mut lib = None;
        let mut section = "";
        for line in text.lines().map(str::trim) {
            if line.starts_with('[') {
                section = line;
            } else if let Some(value) = line.strip_prefix("name").map(str::trim).and_then(|l| l.strip_prefix('=')) {
                let value = value.trim().trim_matches('"').to_owned();
                match section {
                    "[package]" => package = Some(value),
                    "[lib]" => lib = Some(value),
                    _ => {}
                }
            }
        }
        if let Some(package) = package {
            let lib = lib.unwrap_or_else(|| package.replace('-', "_"));
            out.push((package, lib));
        }
    }
    out
}
