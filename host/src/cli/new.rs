//! `udf-host new PATH --lang LANG [--template TEMPLATE]`: start a plugin project.
//!
//! The project needs nothing from the udf-host repository. It gets, all embedded in this
//! binary so that a project always matches the installed udf-host:
//!
//! - the contract this udf-host speaks (`wit/udf.wit`),
//! - the SDK of its language: the Rust SDK as a vendored crate (`udf-sdk/`, with the
//!   dependency versions of this build's `Cargo.lock`), the C, Zig, Python and JavaScript
//!   SDKs as files,
//! - the plugin's source from a template (`host/templates/<language>/<template>.*`),
//! - `build.sh` (one command to a `.wasm`), `test.sh` (a run on a generated scan and the
//!   conformance kit) and a README (`host/templates/README.md` with the language's part).
//!
//! Tool versions (clang, Zig, wit-bindgen, wasm-tools, componentize-py) are those pinned in
//! `scripts/polyglot/common.sh`; componentize-js is pinned by the repository's
//! `scripts/polyglot/js-toolchain/package-lock.json`, copied in.
//!
//! The files are written into a temporary folder beside the target and renamed into place:
//! a failure leaves nothing behind, and an existing folder is never touched.

use super::Failure;
use crate::wasm::{WIT_PACKAGE, WIT_VERSION};
use anyhow::{Context, anyhow, bail};
use clap::{Args, ValueEnum};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

#[derive(Args)]
pub struct NewArgs {
    /// The folder to create; its name is the plugin's name (lowercase letters, digits, '-'
    /// and '_', starting with a letter), e.g. `my-sum` or `plugins/my-sum`.
    path: PathBuf,
    /// The language of the plugin.
    #[arg(long, value_enum)]
    lang: Language,
    /// What the plugin computes to start with.
    #[arg(long, value_enum, default_value_t = Template::Sum)]
    template: Template,
}

/// The languages with an SDK.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Language {
    Rust,
    C,
    Zig,
    Python,
    Js,
}

/// The templates every language has.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Template {
    /// The sum of all frames: a sig buffer, tile method, a custom merge.
    Sum,
    /// The mean of each frame: a nav buffer (one value per scan position), frame method.
    FrameMap,
    /// Dot products of each frame with a stack of masks (param `masks`): virtual detectors.
    Masks,
}

impl Language {
    fn title(self) -> &'static str {
        match self {
            Language::Rust => "Rust",
            Language::C => "C",
            Language::Zig => "Zig",
            Language::Python => "Python",
            Language::Js => "JavaScript",
        }
    }

    fn flag(self) -> &'static str {
        match self {
            Language::Rust => "rust",
            Language::C => "c",
            Language::Zig => "zig",
            Language::Python => "python",
            Language::Js => "js",
        }
    }
}

impl Template {
    fn flag(self) -> &'static str {
        match self {
            Template::Sum => "sum",
            Template::FrameMap => "frame-map",
            Template::Masks => "masks",
        }
    }

    /// What the plugin computes, for its README.
    fn summary(self) -> &'static str {
        match self {
            Template::Sum => "the sum of all frames (LiberTEM's SumUDF)",
            Template::FrameMap => "the mean of each frame, one value per scan position",
            Template::Masks => "the dot product of each frame with each mask of a stack (virtual detectors)",
        }
    }
}

/// The contract, as this binary speaks it.
const WIT: &str = include_str!("../../../wit/udf.wit");

/// `(path in the project, contents)` of files copied verbatim.
type Embedded = &'static [(&'static str, &'static str)];

macro_rules! embed {
    ($($dest:literal => $src:literal),* $(,)?) => {
        &[$(($dest, include_str!($src))),*]
    };
}

/// The Rust SDK's sources (its `Cargo.toml` is derived by [`rust_sdk_manifest`]).
const RUST_SDK: Embedded = embed! {
    "udf-sdk/src/adapter.rs" => "../../../guest-sdk/src/adapter.rs",
    "udf-sdk/src/array.rs" => "../../../guest-sdk/src/array.rs",
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
const C_SDK: Embedded = embed! {
    "sdk/udf_map.c" => "../../../guest-sdk/c/udf_map.c",
    "sdk/udf_nowasi.c" => "../../../guest-sdk/c/udf_nowasi.c",
    "sdk/udf_ops.c" => "../../../guest-sdk/c/udf_ops.c",
    "sdk/udf_sdk.c" => "../../../guest-sdk/c/udf_sdk.c",
    "sdk/udf_sdk.h" => "../../../guest-sdk/c/udf_sdk.h",
    "sdk/udf_view.c" => "../../../guest-sdk/c/udf_view.c",
};

const ZIG_SDK: Embedded = embed! { "sdk/udf.zig" => "../../../guest-sdk/zig/udf.zig" };
/// The Python SDK and `xp` (host arrays), which finds `xp_backend` beside it.
const PYTHON_SDK: Embedded = embed! {
    "src/udf_sdk.py" => "../../../guest-sdk/python/udf_sdk.py",
    "src/xp_backend.py" => "../../../guest-sdk/python/xp_backend.py",
    "src/xp.py" => "../../../python/udf_host/xp.py",
};
const JS_SDK: Embedded = embed! {
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
/// The package name the JavaScript toolchain files carry in the repository.
const JS_PACKAGE_NAME: &str = "\"name\": \"udf-host-componentize-js\"";

const README: &str = include_str!("../../templates/README.md");
const TEST_SCRIPT: &str = include_str!("../../templates/test.sh");

/// A language's part of the project: build script, README part (toolchain, then files
/// after [`FILES_MARKER`]), and the source of each template.
struct LanguageFiles {
    build: &'static str,
    readme: &'static str,
    /// Where the plugin's source goes.
    source: &'static str,
    sum: &'static str,
    frame_map: &'static str,
    masks: &'static str,
    /// Copied verbatim.
    sdk: &'static [Embedded],
    gitignore: &'static str,
    /// The templates' check of the input dtype (`{{float32_input}}`), where it is a function.
    float32_input: &'static str,
}

macro_rules! language_files {
    ($dir:literal, $ext:literal, $source:literal, $sdk:expr, $gitignore:literal) => {
        LanguageFiles {
            build: include_str!(concat!("../../templates/", $dir, "/build.sh")),
            readme: include_str!(concat!("../../templates/", $dir, "/README.md")),
            source: $source,
            sum: include_str!(concat!("../../templates/", $dir, "/sum.", $ext)),
            frame_map: include_str!(concat!("../../templates/", $dir, "/frame-map.", $ext)),
            masks: include_str!(concat!("../../templates/", $dir, "/masks.", $ext)),
            sdk: $sdk,
            gitignore: $gitignore,
            float32_input: "",
        }
    };
}

/// The line in a language's README part between the toolchain and the files.
const FILES_MARKER: &str = "<!-- files -->\n";

fn language_files(lang: Language) -> LanguageFiles {
    match lang {
        Language::Rust => LanguageFiles {
            float32_input: include_str!("../../templates/rust/float32_input.rs"),
            ..language_files!("rust", "rs", "src/lib.rs", &[RUST_SDK], "/target/\n")
        },
        Language::C => language_files!("c", "c", "src/plugin.c", &[C_SDK], "/gen/\n"),
        Language::Zig => language_files!("zig", "zig", "src/plugin.zig", &[C_SDK, ZIG_SDK], "/gen/\n/.zig-cache/\n"),
        Language::Python => LanguageFiles {
            float32_input: include_str!("../../templates/python/float32_input.py"),
            ..language_files!("python", "py", "src/app.py", &[PYTHON_SDK], "/.venv/\n__pycache__/\n")
        },
        Language::Js => LanguageFiles {
            float32_input: include_str!("../../templates/js/float32_input.js"),
            ..language_files!("js", "js", "src/plugin.js", &[JS_SDK], "/node_modules/\n")
        },
    }
}

/// A file of the project.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProjectFile {
    /// Relative to the project folder, `/`-separated.
    pub path: String,
    pub contents: String,
    pub executable: bool,
}

impl ProjectFile {
    fn new(path: &str, contents: impl Into<String>) -> Self {
        ProjectFile { path: path.to_owned(), contents: contents.into(), executable: false }
    }

    fn script(path: &str, contents: impl Into<String>) -> Self {
        ProjectFile { path: path.to_owned(), contents: contents.into(), executable: true }
    }
}

pub fn new(args: NewArgs) -> Result<(), Failure> {
    let path = &args.path;
    let name = plugin_name(path)?;
    if path.symlink_metadata().is_ok() {
        return Err(anyhow!(
            "{} already exists: `udf-host new` writes a new folder and never changes an existing one \
             (choose another name, or remove it first)",
            path.display()
        )
        .into());
    }
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    if !parent.is_dir() {
        return Err(anyhow!("cannot create {}: {} is not a folder", path.display(), parent.display()).into());
    }
    let files = project(&name, args.lang, args.template)?;
    write_project(path, parent, &files)?;
    eprintln!(
        "created {}, a {} plugin: {}. Next:\n  cd {} && ./build.sh && ./test.sh",
        path.display(),
        args.lang.title(),
        args.template.summary(),
        path.display()
    );
    Ok(())
}

/// Write `files` into a temporary folder in `parent`, then rename it to `path`.
fn write_project(path: &Path, parent: &Path, files: &[ProjectFile]) -> anyhow::Result<()> {
    let staging = tempfile::Builder::new()
        .prefix(".udf-host-new-")
        .tempdir_in(parent)
        .with_context(|| format!("cannot create a folder in {}", parent.display()))?;
    for file in files {
        let dest = staging.path().join(&file.path);
        if let Some(dir) = dest.parent() {
            std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        }
        std::fs::write(&dest, &file.contents).with_context(|| format!("cannot write {}", dest.display()))?;
        #[cfg(unix)]
        if file.executable {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&dest, std::fs::Permissions::from_mode(0o755))
                .with_context(|| format!("cannot make {} executable", dest.display()))?;
        }
    }
    let staged = staging.keep();
    if let Err(e) = std::fs::rename(&staged, path) {
        let _ = std::fs::remove_dir_all(&staged);
        return Err(anyhow!("cannot create {}: {e}", path.display()));
    }
    Ok(())
}

/// Names that would clash with the vendored SDK crate, Rust's own crates, or keywords once
/// the name becomes a type name (`none` -> `None`).
const RESERVED_NAMES: &[&str] = &[
    "udf-sdk",
    "udf_sdk",
    "std",
    "core",
    "alloc",
    "test",
    "proc-macro",
    "proc_macro",
    "self",
    "super",
    "crate",
    "none",
    "true",
    "false",
];

/// The plugin name: the last component of `path`, checked.
///
/// # Errors
/// When it is not a lowercase ASCII letter followed by lowercase letters, digits, `-` and
/// `_` (at most 64 characters, not ending in `-` or `_`), or reserved.
pub fn plugin_name(path: &Path) -> anyhow::Result<String> {
    let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
        bail!("'{}' does not end in a plugin name", path.display());
    };
    let rule = "a plugin name is a lowercase letter followed by lowercase letters, digits, '-' and '_' \
                (at most 64 characters, not ending in '-' or '_'), e.g. my-sum";
    let mut chars = name.chars();
    let starts_with_letter = chars.next().is_some_and(|c| c.is_ascii_lowercase());
    let valid_rest = chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
    if !starts_with_letter || !valid_rest || name.len() > 64 || name.ends_with(['-', '_']) {
        bail!("'{name}' is not a valid plugin name: {rule}");
    }
    if RESERVED_NAMES.contains(&name) {
        bail!("'{name}' is reserved (it would clash with a crate or keyword of the same name); choose another");
    }
    Ok(name.to_owned())
}

/// `my-sum` -> `MySum`: the type name of the plugin in its source.
fn type_name(name: &str) -> String {
    name.split(['-', '_'])
        .map(|part| {
            let mut chars = part.chars();
            chars.next().map(|c| c.to_ascii_uppercase().to_string() + chars.as_str()).unwrap_or_default()
        })
        .collect()
}

/// Replace every `{{key}}` of `vars` in `template`.
fn fill(template: &str, vars: &[(&str, String)]) -> String {
    vars.iter().fold(template.to_owned(), |text, (key, value)| text.replace(&format!("{{{{{key}}}}}"), value))
}

/// A version pinned in `scripts/polyglot/common.sh` (`NAME=value  # comment`).
fn pinned(variable: &str) -> anyhow::Result<&'static str> {
    POLYGLOT_VERSIONS
        .lines()
        .find_map(|line| line.strip_prefix(variable)?.strip_prefix('=')?.split_whitespace().next())
        .ok_or_else(|| anyhow!("scripts/polyglot/common.sh pins no {variable} (a bug of udf-host)"))
}

/// Every file of a new project.
///
/// # Errors
/// When the embedded sources of truth (manifests, lockfile, pinned versions) cannot be read:
/// a bug of this build, not of the input.
pub fn project(name: &str, lang: Language, template: Template) -> anyhow::Result<Vec<ProjectFile>> {
    let files = language_files(lang);
    let (major, minor, patch) = WIT_VERSION;
    let masks = template == Template::Masks;
    let mut vars = vec![
        ("name", name.to_owned()),
        ("crate", name.replace('-', "_")),
        ("Type", type_name(name)),
        ("language", lang.title().to_owned()),
        ("lang", lang.flag().to_owned()),
        ("template", template.flag().to_owned()),
        ("summary", template.summary().to_owned()),
        ("host_version", env!("CARGO_PKG_VERSION").to_owned()),
        ("contract", format!("{WIT_PACKAGE}@{major}.{minor}.{patch}")),
        ("clang_version", pinned("CLANG_VERSION")?.to_owned()),
        ("wit_bindgen_version", pinned("WIT_BINDGEN_VERSION")?.to_owned()),
        ("wasm_tools_version", pinned("WASM_TOOLS_VERSION")?.to_owned()),
        ("zig_version", pinned("ZIG_VERSION")?.to_owned()),
        ("componentize_py_version", pinned("COMPONENTIZE_PY_VERSION")?.to_owned()),
        // test.sh: a mask stack for the generated 16 x 16 frames, and the params.
        (
            "prepare",
            if masks {
                "\"$udf_host\" generate \"$tmp/masks.npy\" --nav-shape 3 --sig-shape 16,16 --pattern random\n".into()
            } else {
                String::new()
            },
        ),
        ("params", if masks { " -p masks=@\"$tmp/masks.npy\"".into() } else { String::new() }),
        // README
        ("check_params", if masks { " -p masks=@masks.npy --sig-shape 64,64".into() } else { String::new() }),
        ("run", readme_run(name, template)),
        ("results", readme_results(name, template)),
    ];
    let (toolchain, file_list) = files
        .readme
        .split_once(FILES_MARKER)
        .ok_or_else(|| anyhow!("the {} README part has no files marker (a bug of udf-host)", lang.title()))?;
    vars.push(("toolchain", fill(toolchain.trim_end(), &vars)));
    vars.push(("files", fill(file_list.trim_end(), &vars)));
    vars.push(("float32_input", fill(files.float32_input, &vars)));
    let source = match template {
        Template::Sum => files.sum,
        Template::FrameMap => files.frame_map,
        Template::Masks => files.masks,
    };

    let mut out = vec![
        ProjectFile::new(files.source, fill(source, &vars)),
        ProjectFile::new("wit/udf.wit", WIT),
        ProjectFile::script("build.sh", fill(files.build, &vars)),
        ProjectFile::script("test.sh", fill(TEST_SCRIPT, &vars)),
        ProjectFile::new("README.md", fill(README, &vars)),
        ProjectFile::new(".gitignore", format!("/*.wasm\n{}", files.gitignore)),
    ];
    for sdk in files.sdk {
        out.extend(sdk.iter().map(|(path, contents)| ProjectFile::new(path, *contents)));
    }
    match lang {
        Language::Rust => {
            out.push(ProjectFile::new(
                "Cargo.toml",
                fill(include_str!("../../templates/rust/Cargo.template.toml"), &vars),
            ));
            out.push(ProjectFile::new(".cargo/config.toml", include_str!("../../templates/rust/config.toml")));
            out.push(ProjectFile::new("udf-sdk/Cargo.toml", rust_sdk_manifest()?));
            out.push(ProjectFile::new("Cargo.lock", cargo_lock(name)?));
        }
        Language::Js => {
            let named = format!("\"name\": \"{name}\"");
            out.push(ProjectFile::new("package.json", JS_PACKAGE.replace(JS_PACKAGE_NAME, &named)));
            out.push(ProjectFile::new("package-lock.json", JS_PACKAGE_LOCK.replace(JS_PACKAGE_NAME, &named)));
        }
        Language::C | Language::Zig | Language::Python => {}
    }
    Ok(out)
}

/// The README's commands that run the plugin.
fn readme_run(name: &str, template: Template) -> String {
    match template {
        Template::Masks => format!(
            "udf-host generate masks.npy --nav-shape 3 --sig-shape 64,64 --pattern random   # 3 masks of 0 and 1\n\
             udf-host run {name}.wasm scan.npy -p masks=@masks.npy --out results"
        ),
        Template::Sum | Template::FrameMap => format!("udf-host run {name}.wasm scan.npy --out results"),
    }
}

/// The README's sentence on the results.
fn readme_results(name: &str, template: Template) -> String {
    match template {
        Template::Sum => format!("`results/{name}/intensity.npy` is the sum of all frames (64 x 64)."),
        Template::FrameMap => format!("`results/{name}/mean.npy` is the mean of each frame (a 32 x 32 image)."),
        Template::Masks => format!(
            "`results/{name}/intensity.npy` holds one value per scan position and mask (32 x 32 x 3). \
             Any `.npy` of shape `(M, 64, 64)` works as `masks` (`numpy.save`)."
        ),
    }
}

/// The vendored SDK's `Cargo.toml`: guest-sdk's manifest with what it inherits from the
/// workspace filled in (package fields, dependency versions and features).
///
/// # Errors
/// When the embedded manifests do not have the expected form (a bug of this build).
pub fn rust_sdk_manifest() -> anyhow::Result<String> {
    let workspace: toml::Table = toml::from_str(WORKSPACE_MANIFEST).context("the workspace Cargo.toml")?;
    let sdk: toml::Table = toml::from_str(RUST_SDK_MANIFEST).context("guest-sdk/Cargo.toml")?;
    let table = |t: &toml::Table, key: &str| t.get(key).and_then(toml::Value::as_table).cloned().unwrap_or_default();
    let shared = table(&table(&workspace, "workspace"), "package");
    let shared_deps = table(&table(&workspace, "workspace"), "dependencies");
    let package = table(&sdk, "package");
    let field = |key: &str| -> anyhow::Result<String> {
        match package.get(key) {
            Some(toml::Value::Table(t)) if t.get("workspace").and_then(toml::Value::as_bool) == Some(true) => {
                shared.get(key).map(toml_value).ok_or_else(|| anyhow!("the workspace has no package.{key}"))
            }
            Some(value) => Ok(toml_value(value)),
            None => bail!("guest-sdk/Cargo.toml has no package.{key}"),
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
fn inherit_dependency(name: &str, spec: toml::Value, shared: &toml::Table) -> anyhow::Result<toml::Value> {
    let toml::Value::Table(mut own) = spec else { return Ok(spec) };
    if own.remove("workspace").and_then(|v| v.as_bool()) != Some(true) {
        return Ok(toml::Value::Table(own));
    }
    let mut merged = match shared.get(name) {
        Some(toml::Value::String(version)) => {
            toml::Table::from_iter([("version".to_owned(), toml::Value::String(version.clone()))])
        }
        Some(toml::Value::Table(t)) => t.clone(),
        _ => bail!("the workspace has no dependency {name}"),
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
pub fn cargo_lock(name: &str) -> anyhow::Result<String> {
    struct Entry {
        name: String,
        version: String,
        dependencies: Vec<String>,
        text: String,
    }
    let mut entries = Vec::new();
    for block in CARGO_LOCK.split("\n[[package]]\n").skip(1) {
        let text = block.trim_end().to_owned();
        let table: toml::Table = toml::from_str(&text).context("an entry of Cargo.lock")?;
        let get = |key: &str| table.get(key).and_then(toml::Value::as_str).map(str::to_owned);
        let (Some(name), Some(version)) = (get("name"), get("version")) else {
            bail!("an entry of Cargo.lock without name or version");
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
    let find = |spec: &str| -> anyhow::Result<usize> {
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
            _ => bail!("Cargo.lock: no single entry for '{spec}'"),
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

    const LANGUAGES: [Language; 5] = [Language::Rust, Language::C, Language::Zig, Language::Python, Language::Js];
    const TEMPLATES: [Template; 3] = [Template::Sum, Template::FrameMap, Template::Masks];

    fn repo(path: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(path)
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
        assert_eq!(embedded(PYTHON_SDK, "src/"), listing("guest-sdk/python", ".py"));
        assert_eq!(embedded(JS_SDK, "src/"), listing("guest-sdk/js", ".js"));
    }

    #[test]
    fn every_project_is_complete_and_filled_in() {
        for lang in LANGUAGES {
            for template in TEMPLATES {
                let files = project("my-sum_2", lang, template).unwrap();
                let paths: BTreeSet<&str> = files.iter().map(|f| f.path.as_str()).collect();
                assert_eq!(paths.len(), files.len(), "{lang:?}: a path twice");
                for needed in ["wit/udf.wit", "build.sh", "test.sh", "README.md", ".gitignore"] {
                    assert!(paths.contains(needed), "{lang:?} {template:?}: no {needed}");
                }
                for file in &files {
                    assert!(!file.contents.contains("{{"), "{lang:?} {template:?} {}: a placeholder left", file.path);
                    assert_eq!(file.executable, file.path.ends_with(".sh"), "{}", file.path);
                }
                let readme = &files.iter().find(|f| f.path == "README.md").unwrap().contents;
                assert_eq!(readme.matches(&format!("- `{}`", files[0].path)).count(), 1, "{lang:?}: README files");
                let source = &files[0].contents;
                assert!(
                    source.contains("\"my-sum_2\"") || source.contains("'my-sum_2'"),
                    "{lang:?}: the plugin is named after the project"
                );
                if lang != Language::C && lang != Language::Zig {
                    assert!(source.contains("MySum2"), "{lang:?}: the type is named after the project");
                }
            }
        }
    }

    #[test]
    fn names_are_checked() {
        for good in ["a", "my-sum", "virtual_detector2", "x-1-y"] {
            assert_eq!(plugin_name(Path::new(good)).unwrap(), good);
        }
        assert_eq!(plugin_name(Path::new("some/dir/my-sum")).unwrap(), "my-sum");
        for bad in ["", "My-Sum", "1sum", "-sum", "sum-", "my sum", "my.sum", "sümme", "udf-sdk", "none", "..", "/"] {
            assert!(plugin_name(Path::new(bad)).is_err(), "'{bad}' was accepted");
        }
        assert!(plugin_name(Path::new(&"a".repeat(65))).is_err());
        assert_eq!(type_name("my-sum_2"), "MySum2");
        assert_eq!(type_name("a"), "A");
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
