//! The templates of a project (`host/templates/`): each language's plugin sources, build
//! script and README part, the shared README and test script, and the variables they
//! are filled in with (`{{name}}`, `{{contract}}`, tool versions, ...).

use super::{Language, ScaffoldError, Template, vendor};

pub(super) const README: &str = include_str!("../../templates/README.md");
pub(super) const TEST_SCRIPT: &str = include_str!("../../templates/test.sh");
pub(super) const RUST_MANIFEST: &str = include_str!("../../templates/rust/Cargo.template.toml");
pub(super) const RUST_CARGO_CONFIG: &str = include_str!("../../templates/rust/config.toml");

/// A language's part of the project: build script, README part (toolchain, then files
/// after [`FILES_MARKER`]), and the source of each template.
pub(super) struct LanguageFiles {
    pub build: &'static str,
    readme: &'static str,
    /// Where the plugin's source goes.
    pub source: &'static str,
    sum: &'static str,
    frame_map: &'static str,
    masks: &'static str,
    /// Copied verbatim.
    pub sdk: &'static [vendor::Embedded],
    pub gitignore: &'static str,
    /// The templates' check of the input dtype (`{{float32_input}}`), where it is a function.
    float32_input: &'static str,
}

impl LanguageFiles {
    /// The plugin source of `template`.
    pub fn template(&self, template: Template) -> &'static str {
        match template {
            Template::Sum => self.sum,
            Template::FrameMap => self.frame_map,
            Template::Masks => self.masks,
        }
    }
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

pub(super) fn language_files(lang: Language) -> LanguageFiles {
    use vendor::{C_SDK, JS_SDK, PYTHON_SDK, RUST_SDK, ZIG_SDK};
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

/// The variables the templates of a project called `name` are filled in with.
///
/// # Errors
/// A pinned version or the README's files marker is missing (a bug of this build).
pub(super) fn variables(
    name: &str,
    lang: Language,
    template: Template,
    files: &LanguageFiles,
) -> Result<Vec<(&'static str, String)>, ScaffoldError> {
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
        ("contract", crate::report::contract_id()),
        ("clang_version", vendor::pinned("CLANG_VERSION")?.to_owned()),
        ("wit_bindgen_version", vendor::pinned("WIT_BINDGEN_VERSION")?.to_owned()),
        ("wasm_tools_version", vendor::pinned("WASM_TOOLS_VERSION")?.to_owned()),
        ("zig_version", vendor::pinned("ZIG_VERSION")?.to_owned()),
        ("componentize_py_version", vendor::pinned("COMPONENTIZE_PY_VERSION")?.to_owned()),
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
        .ok_or_else(|| ScaffoldError::Embedded(format!("the {} README part has no files marker", lang.title())))?;
    vars.push(("toolchain", fill(toolchain.trim_end(), &vars)));
    vars.push(("files", fill(file_list.trim_end(), &vars)));
    vars.push(("float32_input", fill(files.float32_input, &vars)));
    Ok(vars)
}

/// Replace every `{{key}}` of `vars` in `template`.
pub(super) fn fill(template: &str, vars: &[(&str, String)]) -> String {
    vars.iter().fold(template.to_owned(), |text, (key, value)| text.replace(&format!("{{{{{key}}}}}"), value))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn type_names_are_camel_case() {
        assert_eq!(type_name("my-sum_2"), "MySum2");
        assert_eq!(type_name("a"), "A");
    }
}
