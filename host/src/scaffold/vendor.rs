//! What a project vendors from this build of udf-host: the contract, each language's SDK
//! (the Rust SDK as a crate whose manifest and lock file carry the dependency versions
//! udf-host was built with), the JavaScript toolchain's package files, and the tool
//! versions the polyglot build scripts pin.

use super::ScaffoldError;
use std::collections::BTreeSet;

/// The contract, as this binary speaks it.
pub(super) const WIT: &str = include_str!("../../../wit/udf.wit");

/// `(path in the project, contents)` of files copied verbatim.
pub(super) type Embedded = &'static [(&'static str, &'static str)];

macro_rules! embed {
    ($($dest:literal => $src:literal),* $(,)?) => {
        &[$(($dest, include_str!($src))),*]
    };
}

/// The Rust SDK's sources (its `Cargo.toml` is derived by [`rust_sdk_manifest`]).
pub(super) const RUST_SDK: Embedded = embed! {
    "udf-sdk/src/adapter.rs" => "../../../guest-sdk/src/adapter.rs",
    "udf-sdk/src/array.rs" => "../../../guest-sdk/src/array.rs",
    "udf-sdk/src/bindings.rs" => "../../../guest-sdk/src/bindings.rs",
    "udf-sdk/src/buffers.rs" => "../../../guest-sdk/src/buffers.rs",
    "udf-sdk/src/declaration.rs" => "../../../guest-sdk/src/declaration.rs",
    "udf-sdk/src/describe.rs" => "../../../guest-sdk/src/describe.rs",
    "udf-sdk/src/element.rs" => "../../../guest-sdk/src/element.rs",
    "udf-sdk/src/error.rs" => "../../../guest-sdk/src/error.rs",
    "udf-sdk/src/lib.rs" => "../../../guest-sdk/src/lib.rs",
    "udf-sdk/src/map.rs" => "../../../guest-sdk/src/map.rs",
    "udf-sdk/src/ops.rs" => "../../../guest-sdk/src/ops.rs",
    "udf-sdk/src/params.rs" => "../../../guest-sdk/src/params.rs",
    "udf-sdk/src/simd.rs" => "../../../guest-sdk/src/simd.rs",
    "udf-sdk/src/tile.rs" => "../../../guest-sdk/src/tile.rs",
    "udf-sdk/src/udf.rs" => "../../../guest-sdk/src/udf.rs",
    "udf-sdk/examples/frame_map.rs" => "../../../guest-sdk/examples/frame_map.rs",
    "udf-sdk/examples/my_sum.rs" => "../../../guest-sdk/examples/my_sum.rs",
    "udf-sdk/examples/short_sum.rs" => "../../../guest-sdk/examples/short_sum.rs",
};

/// The C SDK (also under the Zig SDK).
pub(super) const C_SDK: Embedded = embed! {
    "sdk/udf_array.c" => "../../../guest-sdk/c/udf_array.c",
    "sdk/udf_map.c" => "../../../guest-sdk/c/udf_map.c",
    "sdk/udf_nowasi.c" => "../../../guest-sdk/c/udf_nowasi.c",
    "sdk/udf_ops.c" => "../../../guest-sdk/c/udf_ops.c",
    "sdk/udf_sdk.c" => "../../../guest-sdk/c/udf_sdk.c",
    "sdk/udf_sdk.h" => "../../../guest-sdk/c/udf_sdk.h",
    "sdk/udf_view.c" => "../../../guest-sdk/c/udf_view.c",
};

pub(super) const ZIG_SDK: Embedded = embed! { "sdk/udf.zig" => "../../../guest-sdk/zig/udf.zig" };
/// The Python SDK and `xp` (host arrays), which finds `xp_backend` beside it.
pub(super) const PYTHON_SDK: Embedded = embed! {
    "src/udf_sdk.py" => "../../../guest-sdk/python/udf_sdk.py",
    "src/xp_backend.py" => "../../../guest-sdk/python/xp_backend.py",
    "src/xp.py" => "../../../python/udf_host/xp.py",
};
pub(super) const JS_SDK: Embedded = embed! {
    "src/udf-sdk.js" => "../../../guest-sdk/js/udf-sdk.js",
    "src/xp.js" => "../../../guest-sdk/js/xp.js",
};

/// Where the Rust SDK's manifest and dependency versions come from.
const WORKSPACE_MANIFEST: &str = include_str!("../../../Cargo.toml");
const RUST_SDK_MANIFEST: &str = include_str!("../../../guest-sdk/Cargo.toml");
const CARGO_LOCK: &str = include_str!("../../../Cargo.lock");
/// The pinned tool versions of the polyglot build scripts.
const POLYGLOT_VERSIONS: &str = include_str!("../../../scripts/polyglot/common.sh");
/// The pinned componentize-js.
const JS_PACKAGE: &str = include_str!("../../../scripts/polyglot/js-toolchain/package.json");
const JS_PACKAGE_LOCK: &str = include_str!("../../../scripts/polyglot/js-toolchain/package-lock.json");
/// componentize-js's command line without FinalizationRegistry in the bindings (host arrays).
pub(super) const JS_COMPONENTIZE: &str = include_str!("../../../scripts/polyglot/js-toolchain/componentize.mjs");
/// The package name the JavaScript toolchain files carry in the repository.
const JS_PACKAGE_NAME: &str = "\"name\": \"udf-host-componentize-js\"";

fn bug(message: String) -> ScaffoldError {
    ScaffoldError::Embedded(message)
}

/// `text` (one of the embedded files, named `what`) as TOML.
fn parse(text: &str, what: &str) -> Result<toml::Table, ScaffoldError> {
    toml::from_str(text).map_err(|e| bug(format!("{what}: {e}")))
}

/// The JavaScript toolchain's `package.json` and `package-lock.json`, named after the
/// project.
pub(super) fn js_packages(name: &str) -> (String, String) {
    let named = format!("\"name\": \"{name}\"");
    (JS_PACKAGE.replace(JS_PACKAGE_NAME, &named), JS_PACKAGE_LOCK.replace(JS_PACKAGE_NAME, &named))
}

/// A version pinned in `scripts/polyglot/common.sh` (`NAME=value  # comment`).
pub(super) fn pinned(variable: &str) -> Result<&'static str, ScaffoldError> {
    POLYGLOT_VERSIONS
        .lines()
        .find_map(|line| line.strip_prefix(variable)?.strip_prefix('=')?.split_whitespace().next())
        .ok_or_else(|| ScaffoldError::Embedded(format!("scripts/polyglot/common.sh pins no {variable}")))
}

/// The vendored SDK's `Cargo.toml`: guest-sdk's manifest with what it inherits from the
/// workspace filled in (package fields, dependency versions and features).
///
/// # Errors
/// When the embedded manifests do not have the expected form (a bug of this build).
pub fn rust_sdk_manifest() -> Result<String, ScaffoldError> {
    let workspace: toml::Table = parse(WORKSPACE_MANIFEST, "the workspace Cargo.toml")?;
    let sdk: toml::Table = parse(RUST_SDK_MANIFEST, "guest-sdk/Cargo.toml")?;
    let table = |t: &toml::Table, key: &str| t.get(key).and_then(toml::Value::as_table).cloned().unwrap_or_default();
    let shared = table(&table(&workspace, "workspace"), "package");
    let shared_deps = table(&table(&workspace, "workspace"), "dependencies");
    let package = table(&sdk, "package");
    let field = |key: &str| -> Result<String, ScaffoldError> {
        match package.get(key) {
            Some(toml::Value::Table(t)) if t.get("workspace").and_then(toml::Value::as_bool) == Some(true) => {
                shared.get(key).map(toml_value).ok_or_else(|| bug(format!("the workspace has no package.{key}")))
            }
            Some(value) => Ok(toml_value(value)),
            None => Err(bug(format!("guest-sdk/Cargo.toml has no package.{key}"))),
        }
    };
    let mut out = String::from(
        "# The guest SDK of udf-host, copied by `udf-host new`; versions as udf-host was built with.\n[package]\n",
    );
    for key in ["name", "version", "edition", "rust-version", "license", "description"] {
        out.push_str(&format!("{key} = {}\n", field(key)?));
    }
    out.push_str(
        "publish = false\n# examples/my_sum.rs is the example in the crate's documentation.\nautoexamples = false\n",
    );
    out.push_str("\n[dependencies]\n");
    for (name, spec) in table(&sdk, "dependencies") {
        out.push_str(&format!("{name} = {}\n", toml_value(&inherit_dependency(&name, spec, &shared_deps)?)));
    }
    Ok(out)
}

/// A dependency spec with `workspace = true` resolved against the workspace's.
fn inherit_dependency(name: &str, spec: toml::Value, shared: &toml::Table) -> Result<toml::Value, ScaffoldError> {
    let toml::Value::Table(mut own) = spec else { return Ok(spec) };
    if own.remove("workspace").and_then(|v| v.as_bool()) != Some(true) {
        return Ok(toml::Value::Table(own));
    }
    let mut merged = match shared.get(name) {
        Some(toml::Value::String(version)) => {
            toml::Table::from_iter([("version".to_owned(), toml::Value::String(version.clone()))])
        }
        Some(toml::Value::Table(t)) => t.clone(),
        _ => return Err(bug(format!("the workspace has no dependency {name}"))),
    };
    for (key, value) in own {
        if key == "features" {
            let mut features: BTreeSet<String> = BTreeSet::new();
            for list in [merged.get("features"), Some(&value)].into_iter().flatten() {
                features.extend(list.as_array().into_iter().flatten().filter_map(|f| f.as_str().map(str::to_owned)));
            }
            merged.insert(key, toml::Value::Array(features.into_iter().map(toml::Value::String).collect()));
        } else {
            merged.insert(key, value);
        }
    }
    Ok(toml::Value::Table(merged))
}

/// A TOML value as inline TOML text.
fn toml_value(value: &toml::Value) -> String {
    match value {
        toml::Value::String(s) => format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\"")),
        toml::Value::Table(t) => {
            let items: Vec<String> = t.iter().map(|(k, v)| format!("{k} = {}", toml_value(v))).collect();
            format!("{{ {} }}", items.join(", "))
        }
        toml::Value::Array(a) => format!("[{}]", a.iter().map(toml_value).collect::<Vec<_>>().join(", ")),
        toml::Value::Boolean(b) => b.to_string(),
        toml::Value::Integer(i) => i.to_string(),
        toml::Value::Float(f) => f.to_string(),
        toml::Value::Datetime(d) => d.to_string(),
    }
}

/// A `Cargo.lock` for the project: this build's entries for the vendored SDK and everything
/// it depends on (for every platform), plus the plugin crate. The project builds with the
/// versions udf-host was tested with.
///
/// # Errors
/// When the embedded lockfile does not have the expected form (a bug of this build).
pub fn cargo_lock(name: &str) -> Result<String, ScaffoldError> {
    struct Entry {
        name: String,
        version: String,
        dependencies: Vec<String>,
        text: String,
    }
    let mut entries = Vec::new();
    for block in CARGO_LOCK.split("\n[[package]]\n").skip(1) {
        let text = block.trim_end().to_owned();
        let table: toml::Table = parse(&text, "an entry of Cargo.lock")?;
        let get = |key: &str| table.get(key).and_then(toml::Value::as_str).map(str::to_owned);
        let (Some(name), Some(version)) = (get("name"), get("version")) else {
            return Err(bug("an entry of Cargo.lock without name or version".into()));
        };
        let dependencies = table
            .get("dependencies")
            .and_then(toml::Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|d| d.as_str().map(str::to_owned))
            .collect();
        entries.push(Entry { name, version, dependencies, text });
    }
    // A dependency is written `name`, `name version` or `name version (source)`.
    let find = |spec: &str| -> Result<usize, ScaffoldError> {
        let mut words = spec.split_whitespace();
        let name = words.next().unwrap_or_default();
        let version = words.next();
        let mut matches = entries
            .iter()
            .enumerate()
            .filter(|(_, e)| e.name == name && version.is_none_or(|v| v == e.version))
            .map(|(i, _)| i);
        match (matches.next(), matches.next()) {
            (Some(i), None) => Ok(i),
            _ => Err(bug(format!("Cargo.lock: no single entry for '{spec}'"))),
        }
    };
    let mut keep = BTreeSet::new();
    let mut todo = vec![find("udf-sdk")?];
    while let Some(i) = todo.pop() {
        if keep.insert(i) {
            for dep in &entries[i].dependencies {
                todo.push(find(dep)?);
            }
        }
    }
    let mut blocks: Vec<(&str, String)> =
        keep.iter().map(|&i| (entries[i].name.as_str(), entries[i].text.clone())).collect();
    blocks.push((name, format!("name = \"{name}\"\nversion = \"0.1.0\"\ndependencies = [\n \"udf-sdk\",\n]")));
    blocks.sort_by(|a, b| a.0.cmp(b.0));
    let header = CARGO_LOCK.split("\n[[package]]\n").next().unwrap_or_default().trim_end();
    let mut out = format!("{header}\n");
    for (_, text) in blocks {
        out.push_str("\n[[package]]\n");
        out.push_str(&text);
        out.push('\n');
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo(path: &str) -> std::path::PathBuf {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(path)
    }

    /// The file names in `dir` with extension `ext`, sorted.
    fn listing(dir: &str, ext: &str) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(repo(dir))
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|n| n.ends_with(ext))
            .collect();
        names.sort();
        names
    }

    /// The embedded copies of a directory's files, by file name.
    fn embedded(list: Embedded, prefix: &str) -> Vec<String> {
        let mut names: Vec<String> =
            list.iter().filter_map(|(dest, _)| dest.strip_prefix(prefix)).map(str::to_owned).collect();
        names.sort();
        names
    }

    #[test]
    fn every_sdk_source_file_is_embedded() {
        // A new file in an SDK must be added to the lists above, or the copy will not build.
        assert_eq!(embedded(RUST_SDK, "udf-sdk/src/"), listing("guest-sdk/src", ".rs"));
        assert_eq!(embedded(RUST_SDK, "udf-sdk/examples/"), listing("guest-sdk/examples", ".rs"));
        let c: Vec<String> =
            listing("guest-sdk/c", "").into_iter().filter(|n| n.ends_with(".c") || n.ends_with(".h")).collect();
        assert_eq!(embedded(C_SDK, "sdk/"), c);
        assert_eq!(embedded(ZIG_SDK, "sdk/"), listing("guest-sdk/zig", ".zig"));
        // And `xp` (python/udf_host/xp.py), beside the SDK as scripts/polyglot/python.sh stages it.
        let mut python = listing("guest-sdk/python", ".py");
        python.push("xp.py".into());
        python.sort();
        assert_eq!(embedded(PYTHON_SDK, "src/"), python);
        assert_eq!(embedded(JS_SDK, "src/"), listing("guest-sdk/js", ".js"));
    }

    #[test]
    fn pinned_versions_are_found() {
        for variable in
            ["CLANG_VERSION", "WIT_BINDGEN_VERSION", "WASM_TOOLS_VERSION", "ZIG_VERSION", "COMPONENTIZE_PY_VERSION"]
        {
            let version = pinned(variable).unwrap();
            assert!(version.chars().next().is_some_and(|c| c.is_ascii_digit()), "{variable}={version}");
        }
        assert!(pinned("NO_SUCH_VERSION").is_err());
        assert_eq!(JS_PACKAGE.matches(JS_PACKAGE_NAME).count(), 1);
        assert_eq!(JS_PACKAGE_LOCK.matches(JS_PACKAGE_NAME).count(), 2);
    }

    #[test]
    fn the_sdk_manifest_has_every_dependency_with_the_workspace_versions() {
        let manifest: toml::Table = toml::from_str(&rust_sdk_manifest().unwrap()).unwrap();
        let sdk: toml::Table = toml::from_str(RUST_SDK_MANIFEST).unwrap();
        let workspace: toml::Table = toml::from_str(WORKSPACE_MANIFEST).unwrap();
        let deps = manifest["dependencies"].as_table().unwrap();
        let names = |t: &toml::Table| t.keys().cloned().collect::<Vec<_>>();
        assert_eq!(names(deps), names(sdk["dependencies"].as_table().unwrap()));
        let wit_bindgen = &workspace["workspace"]["dependencies"]["wit-bindgen"];
        assert_eq!(deps["wit-bindgen"]["version"], wit_bindgen["version"]);
        assert_eq!(deps["wit-bindgen"]["default-features"], wit_bindgen["default-features"]);
        assert_eq!(deps["wit-bindgen"]["features"], wit_bindgen["features"]);
        assert_eq!(manifest["package"]["name"].as_str(), Some("udf-sdk"));
        assert_eq!(manifest["package"]["version"], workspace["workspace"]["package"]["version"]);
        assert!(manifest.get("lints").is_none(), "no workspace lints outside the workspace");
    }

    #[test]
    fn the_lockfile_holds_the_sdk_dependencies_and_nothing_of_the_host() {
        let lock: toml::Table = toml::from_str(&cargo_lock("my-sum").unwrap()).unwrap();
        let packages = lock["package"].as_array().unwrap();
        let names: BTreeSet<&str> = packages.iter().map(|p| p["name"].as_str().unwrap()).collect();
        for needed in ["my-sum", "udf-sdk", "wit-bindgen", "ndarray", "bytemuck"] {
            assert!(names.contains(needed), "no {needed}");
        }
        for host_only in ["udf-host", "wasmtime", "clap"] {
            assert!(!names.contains(host_only), "{host_only} is not a dependency of the SDK");
        }
        // Every dependency named by an entry has an entry.
        for package in packages {
            for dep in package.get("dependencies").and_then(|d| d.as_array()).into_iter().flatten() {
                let dep = dep.as_str().unwrap().split_whitespace().next().unwrap();
                assert!(names.contains(dep), "{dep} is missing");
            }
        }
    }
}
