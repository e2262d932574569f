//! Starting a plugin project (`udf-host new PATH --lang LANG [--template TEMPLATE]`): a
//! folder with a plugin that builds with one command and needs nothing from the
//! udf-host repository.
//!
//! A project gets, all embedded in this build so that it always matches the installed
//! udf-host:
//!
//! - the contract this udf-host speaks (`wit/udf.wit`),
//! - the SDK of its language ([`vendor`]): the Rust SDK as a vendored crate (`udf-sdk/`,
//!   with the dependency versions of this build's `Cargo.lock`), the C, Zig, Python and
//!   JavaScript SDKs as files,
//! - the plugin's source from a template ([`templates`]: `host/templates/<language>/`),
//! - `build.sh` (one command to a `.wasm`), `test.sh` (a run on a generated scan and the
//!   conformance kit) and a README (`host/templates/README.md` with the language's part).
//!
//! Tool versions (clang, Zig, wit-bindgen, wasm-tools, componentize-py) are those pinned in
//! `scripts/polyglot/common.sh`; componentize-js is pinned by the repository's
//! `scripts/polyglot/js-toolchain/package-lock.json`, copied in with the wrapper that builds
//! with it (`componentize.mjs`: no FinalizationRegistry in the bindings, for host arrays).
//!
//! [`create`] writes the files into a temporary folder beside the target and renames it
//! into place: a failure leaves nothing behind, and an existing folder is never touched.

mod templates;
mod vendor;

use std::path::{Path, PathBuf};

/// The languages with an SDK.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Language {
    Rust,
    C,
    Zig,
    Python,
    Js,
}

/// The templates every language has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Template {
    /// The sum of all frames: a sig buffer, tile method, a custom merge.
    Sum,
    /// The mean of each frame: a nav buffer (one value per scan position), frame method.
    FrameMap,
    /// Dot products of each frame with a stack of masks (param `masks`): virtual detectors.
    Masks,
}

impl Language {
    /// Every language, in the order the help lists them.
    pub const ALL: [Language; 5] = [Language::Rust, Language::C, Language::Zig, Language::Python, Language::Js];

    /// Its name in words (`JavaScript`).
    pub fn title(self) -> &'static str {
        match self {
            Language::Rust => "Rust",
            Language::C => "C",
            Language::Zig => "Zig",
            Language::Python => "Python",
            Language::Js => "JavaScript",
        }
    }

    /// Its name on the command line (`js`).
    pub fn flag(self) -> &'static str {
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
    /// Every template, the default first.
    pub const ALL: [Template; 3] = [Template::Sum, Template::FrameMap, Template::Masks];

    /// Its name on the command line (`frame-map`).
    pub fn flag(self) -> &'static str {
        match self {
            Template::Sum => "sum",
            Template::FrameMap => "frame-map",
            Template::Masks => "masks",
        }
    }

    /// What the plugin computes, for its README.
    pub fn summary(self) -> &'static str {
        match self {
            Template::Sum => "the sum of all frames (LiberTEM's SumUDF)",
            Template::FrameMap => "the mean of each frame, one value per scan position",
            Template::Masks => "the dot product of each frame with each mask of a stack (virtual detectors)",
        }
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

/// What a plugin name may be, in words.
const NAME_RULE: &str = "a plugin name is a lowercase letter followed by lowercase letters, digits, '-' and '_' \
                         (at most 64 characters, not ending in '-' or '_'), e.g. my-sum";

/// Why a project could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ScaffoldError {
    #[error("'{}' does not end in a plugin name", .0.display())]
    NoName(PathBuf),
    #[error("'{0}' is not a valid plugin name: {NAME_RULE}")]
    InvalidName(String),
    #[error("'{0}' is reserved (it would clash with a crate or keyword of the same name); choose another")]
    Reserved(String),
    #[error(
        "{} already exists: `udf-host new` writes a new folder and never changes an existing one \
         (choose another name, or remove it first)",
        .0.display()
    )]
    Exists(PathBuf),
    #[error("cannot create {}: {} is not a folder", path.display(), parent.display())]
    NoParent { path: PathBuf, parent: PathBuf },
    #[error("{what}: {source}")]
    Io { what: String, source: std::io::Error },
    /// The embedded sources of truth (manifests, lockfile, pinned versions, templates)
    /// do not have the expected form: a bug of this build, not of the input.
    #[error("{0} (a bug of udf-host)")]
    Embedded(String),
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
pub fn plugin_name(path: &Path) -> Result<String, ScaffoldError> {
    let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
        return Err(ScaffoldError::NoName(path.to_owned()));
    };
    let mut chars = name.chars();
    let starts_with_letter = chars.next().is_some_and(|c| c.is_ascii_lowercase());
    let valid_rest = chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
    if !starts_with_letter || !valid_rest || name.len() > 64 || name.ends_with(['-', '_']) {
        return Err(ScaffoldError::InvalidName(name.to_owned()));
    }
    if RESERVED_NAMES.contains(&name) {
        return Err(ScaffoldError::Reserved(name.to_owned()));
    }
    Ok(name.to_owned())
}

/// Every file of a new project called `name`.
///
/// # Errors
/// [`ScaffoldError::Embedded`] when the embedded sources of truth cannot be read: a bug of
/// this build, not of the input.
pub fn project(name: &str, lang: Language, template: Template) -> Result<Vec<ProjectFile>, ScaffoldError> {
    let files = templates::language_files(lang);
    let vars = templates::variables(name, lang, template, &files)?;
    let fill = |text: &str| templates::fill(text, &vars);
    let mut out = vec![
        ProjectFile::new(files.source, fill(files.template(template))),
        ProjectFile::new("wit/udf.wit", vendor::WIT),
        ProjectFile::script("build.sh", fill(files.build)),
        ProjectFile::script("test.sh", fill(templates::TEST_SCRIPT)),
        ProjectFile::new("README.md", fill(templates::README)),
        ProjectFile::new(".gitignore", format!("/*.wasm\n{}", files.gitignore)),
    ];
    for sdk in files.sdk {
        out.extend(sdk.iter().map(|(path, contents)| ProjectFile::new(path, *contents)));
    }
    match lang {
        Language::Rust => {
            out.push(ProjectFile::new("Cargo.toml", fill(templates::RUST_MANIFEST)));
            out.push(ProjectFile::new(".cargo/config.toml", templates::RUST_CARGO_CONFIG));
            out.push(ProjectFile::new("udf-sdk/Cargo.toml", vendor::rust_sdk_manifest()?));
            out.push(ProjectFile::new("Cargo.lock", vendor::cargo_lock(name)?));
        }
        Language::Js => {
            let (package, lock) = vendor::js_packages(name);
            out.push(ProjectFile::new("package.json", package));
            out.push(ProjectFile::new("package-lock.json", lock));
            out.push(ProjectFile::new("componentize.mjs", vendor::JS_COMPONENTIZE));
        }
        Language::C | Language::Zig | Language::Python => {}
    }
    Ok(out)
}

/// Create the project folder `path` (its name is the plugin's) with a plugin in `lang`
/// made from `template`: written into a temporary folder beside it and renamed into
/// place.
///
/// # Errors
/// A bad name, an existing `path`, a parent that is not a folder, or an I/O error
/// (nothing is left behind).
pub fn create(path: &Path, lang: Language, template: Template) -> Result<(), ScaffoldError> {
    let name = plugin_name(path)?;
    if path.symlink_metadata().is_ok() {
        return Err(ScaffoldError::Exists(path.to_owned()));
    }
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    if !parent.is_dir() {
        return Err(ScaffoldError::NoParent { path: path.to_owned(), parent: parent.to_owned() });
    }
    write(path, parent, &project(&name, lang, template)?)
}

/// Write `files` into a temporary folder in `parent`, then rename it to `path`.
fn write(path: &Path, parent: &Path, files: &[ProjectFile]) -> Result<(), ScaffoldError> {
    let io = |what: String| move |source| ScaffoldError::Io { what, source };
    let staging = tempfile::Builder::new()
        .prefix(".udf-host-new-")
        .tempdir_in(parent)
        .map_err(io(format!("cannot create a folder in {}", parent.display())))?;
    for file in files {
        let dest = staging.path().join(&file.path);
        if let Some(dir) = dest.parent() {
            std::fs::create_dir_all(dir).map_err(io(format!("cannot create {}", dir.display())))?;
        }
        std::fs::write(&dest, &file.contents).map_err(io(format!("cannot write {}", dest.display())))?;
        #[cfg(unix)]
        if file.executable {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&dest, std::fs::Permissions::from_mode(0o755))
                .map_err(io(format!("cannot make {} executable", dest.display())))?;
        }
    }
    let staged = staging.keep();
    if let Err(e) = std::fs::rename(&staged, path) {
        let _ = std::fs::remove_dir_all(&staged);
        return Err(ScaffoldError::Io { what: format!("cannot create {}", path.display()), source: e });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn every_project_is_complete_and_filled_in() {
        for lang in Language::ALL {
            for template in Template::ALL {
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
    }

    #[test]
    fn no_file_of_a_project_names_a_placeholder_repository() {
        for lang in Language::ALL {
            for file in project("my-sum", lang, Template::Sum).unwrap() {
                for url in ["example.invalid", "example.com", "repository ="] {
                    assert!(!file.contents.contains(url), "{lang:?} {}: {url}", file.path);
                }
            }
        }
    }
}
