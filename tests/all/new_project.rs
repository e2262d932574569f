//! `udf-host new`: for every language whose toolchain is here, a project of every template
//! is made in a temporary folder outside the repository, built with its own `build.sh`, run
//! on a generated scan against a plain reference, and checked with its own `test.sh` (a run
//! and the conformance kit). Rust, Python and JavaScript are required (scripts/test.sh
//! installs componentize-py and componentize-js); C and Zig run where their toolchains are
//! installed (scripts/polyglot/{c,zig}.sh) and are skipped with the reason otherwise.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use udf_host::cli::{execute, exit};
use udf_host_tests::fixtures::{self, Data, Ty};
use udf_host_tests::reference::{assert_close, sum_frames, to_f64};

const TEMPLATES: [&str; 3] = ["sum", "frame-map", "masks"];

/// The udf-host command line as a program (tests/src/bin/udf-host-cli.rs).
fn udf_host() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_udf-host-cli"))
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("tests/ is in the repository").to_owned()
}

/// Where the polyglot scripts install their tools.
fn tools() -> PathBuf {
    repo().join("target/polyglot/tools")
}

/// `name` on the PATH.
fn on_path(name: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?).map(|dir| dir.join(name)).find(|p| p.is_file())
}

/// `name` on the PATH or installed by the polyglot scripts.
fn tool(name: &str) -> Option<PathBuf> {
    on_path(name).or_else(|| Some(tools().join("bin").join(name)).filter(|p| p.is_file()))
}

type Env = Vec<(&'static str, OsString)>;

/// wit-bindgen and wasm-tools for the C and Zig build scripts.
fn c_bindings_tools() -> Result<Env, String> {
    let wit_bindgen = tool("wit-bindgen").ok_or("wit-bindgen is not installed")?;
    let wasm_tools = tool("wasm-tools").ok_or("wasm-tools is not installed")?;
    Ok(vec![("WIT_BINDGEN", wit_bindgen.into()), ("WASM_TOOLS", wasm_tools.into())])
}

/// The environment `build.sh` of a `lang` project needs here, or why it cannot run.
fn toolchain(lang: &str) -> Result<Env, String> {
    match lang {
        // One target directory for every generated Rust project: later builds are incremental.
        "rust" => Ok(vec![("CARGO_TARGET_DIR", repo().join("target/new-projects").into())]),
        "c" => {
            on_path("clang-19").ok_or("clang-19 is not installed (scripts/polyglot/c.sh installs it)")?;
            if !Path::new("/usr/include/wasm32-wasi").is_dir() {
                return Err("wasi-libc is not installed (scripts/polyglot/c.sh installs it)".into());
            }
            let mut env = c_bindings_tools()?;
            env.push(("EXTRA_CFLAGS", "-Werror".into()));
            Ok(env)
        }
        "zig" => {
            let python = tools().join("venv/bin/python");
            let zig: OsString = if on_path("zig").is_some() {
                "zig".into()
            } else if python.is_file()
                && Command::new(&python).args(["-c", "import ziglang"]).output().is_ok_and(|o| o.status.success())
            {
                format!("{} -m ziglang", python.display()).into()
            } else {
                return Err("Zig is not installed (scripts/polyglot/zig.sh installs it)".into());
            };
            let mut env = c_bindings_tools()?;
            env.push(("ZIG", zig));
            env.push(("ZIG_GLOBAL_CACHE_DIR", tools().join("zig-cache").into()));
            Ok(env)
        }
        "python" => {
            let tool = Some(tools().join("venv/bin/componentize-py"))
                .filter(|p| p.is_file())
                .or_else(|| on_path("componentize-py"))
                .ok_or("componentize-py is not installed (scripts/polyglot/python.sh installs it)")?;
            Ok(vec![("COMPONENTIZE_PY", tool.into())])
        }
        "js" => {
            on_path("node").ok_or("Node.js is not installed")?;
            let cli = tools().join("js/node_modules/@bytecodealliance/componentize-js/src/cli.js");
            if !cli.is_file() {
                return Err("componentize-js is not installed (scripts/polyglot/js.sh installs it)".into());
            }
            Ok(vec![("COMPONENTIZE_JS", cli.into())])
        }
        other => panic!("no language {other}"),
    }
}

/// Run `program` in `dir` with `env` (and none of the outer cargo's build settings);
/// panics with its output when it fails.
fn run(program: &Path, args: &[&str], dir: &Path, env: &Env) -> Output {
    let mut command = Command::new(program);
    command.args(args).current_dir(dir);
    for var in
        ["CARGO_TARGET_DIR", "CARGO_BUILD_TARGET", "RUSTFLAGS", "CARGO_ENCODED_RUSTFLAGS", "RUSTC_WORKSPACE_WRAPPER"]
    {
        command.env_remove(var);
    }
    command.envs(env.iter().map(|(k, v)| (k, v)));
    let output = command.output().unwrap_or_else(|e| panic!("cannot run {}: {e}", program.display()));
    assert!(
        output.status.success(),
        "{} {args:?} in {} failed ({}):\n{}\n{}",
        program.display(),
        dir.display(),
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// A uint16 scan (5 x 6 positions, 12 x 10 frames) of values in [0, 1000).
fn scan() -> Data {
    let data = fixtures::mk_uniform(&[5, 6], &[12, 10], 23);
    Data { values: data.values.iter().map(|v| v * 1000.0).collect(), ..data }.rounded(Ty::U16)
}

/// What the template computes, by a plain loop: (buffer, shape, values).
fn reference(template: &str, data: &Data, masks: &Data) -> (&'static str, Vec<usize>, Vec<f64>) {
    let frames = 0..data.frames();
    match template {
        "sum" => ("intensity", data.sig.clone(), sum_frames(data, None)),
        "frame-map" => {
            let means = frames.map(|i| data.frame(i).iter().sum::<f64>() / data.frame_len() as f64);
            ("mean", data.nav.clone(), means.collect())
        }
        "masks" => {
            let dots = frames.flat_map(|i| {
                (0..masks.frames()).map(move |m| data.frame(i).iter().zip(masks.frame(m)).map(|(x, w)| x * w).sum())
            });
            ("intensity", [data.nav.clone(), vec![masks.frames()]].concat(), dots.collect())
        }
        other => panic!("no template {other}"),
    }
}

/// Make, build, run and check one project of `lang` from each template.
fn check_language(lang: &str, required: bool) {
    let env = match toolchain(lang) {
        Ok(env) => env,
        Err(reason) if !required => {
            eprintln!("skipped the {lang} projects of `udf-host new`: {reason}");
            return;
        }
        Err(reason) => panic!("{reason}; scripts/test.sh installs it"),
    };
    let cache = udf_host_tests::test_cache_dir();
    for template in TEMPLATES {
        // Outside the repository: the project must need nothing from it.
        let dir = tempfile::tempdir().unwrap();
        assert!(!dir.path().starts_with(repo()), "{} is inside the repository", dir.path().display());
        let name = format!("{lang}-{template}");
        run(udf_host(), &["new", &name, "--lang", lang, "--template", template], dir.path(), &env);
        let project = dir.path().join(&name);
        run(&project.join("build.sh"), &[], &project, &env);
        let wasm = project.join(format!("{name}.wasm"));

        let data = scan();
        fixtures::write_npy(&dir.path().join("scan.npy"), &data, Ty::U16);
        let masks = fixtures::mk_uniform(&[3], &data.sig, 5).rounded(Ty::F32);
        fixtures::write_npy(&dir.path().join("masks.npy"), &masks, Ty::F32);
        // The first load compiles the plugin (Python and JavaScript embed an interpreter: a
        // minute or more on a busy machine) into the cache test.sh then uses.
        let mut args = vec!["run", wasm.to_str().unwrap(), "scan.npy", "--out", "out", "-q", "--partitions", "3"];
        args.extend(["--compile-timeout", "1800"]);
        let cache_arg = cache.display().to_string();
        args.extend(["--cache-dir", &cache_arg]);
        if template == "masks" {
            args.extend(["-p", "masks=@masks.npy"]);
        }
        run(udf_host(), &args, dir.path(), &env);
        let (buffer, shape, expected) = reference(template, &data, &masks);
        let result = udf_host::npy::read_array(&dir.path().join("out").join(&name).join(format!("{buffer}.npy")))
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(result.shape(), &shape[..], "{name}: shape of {buffer}");
        assert_close(&to_f64(&result), &expected, 1e-5, &format!("{name}: {buffer}"));

        // The project's own test: a run and the conformance kit.
        let mut test_env = env.clone();
        test_env.push(("UDF_HOST", udf_host().into()));
        test_env.push(("UDF_HOST_CACHE_DIR", cache.clone().into()));
        let output = run(&project.join("test.sh"), &[], &project, &test_env);
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(stdout.contains("CONFORMS") && stdout.contains("passed"), "{name}: test.sh said\n{stdout}");
    }
}

#[test]
fn rust_projects_build_run_and_conform() {
    check_language("rust", true);
}

#[test]
fn python_projects_build_run_and_conform() {
    check_language("python", true);
}

#[test]
fn js_projects_build_run_and_conform() {
    check_language("js", true);
}

#[test]
fn c_projects_build_run_and_conform_where_clang_is_installed() {
    check_language("c", false);
}

#[test]
fn zig_projects_build_run_and_conform_where_zig_is_installed() {
    check_language("zig", false);
}

fn new(args: &[&str]) -> Result<(), (u8, String)> {
    let all = ["udf-host", "new"].iter().chain(args).map(|s| (*s).to_owned());
    execute(all).map_err(|f| (f.code, format!("{:#}", f.error)))
}

/// The files under `dir`, relative, sorted.
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_owned()];
    while let Some(d) = todo.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                todo.push(path);
            } else {
                out.push(path.strip_prefix(dir).unwrap().to_owned());
            }
        }
    }
    out.sort();
    out
}

#[test]
fn a_project_carries_this_hosts_contract_and_sdk_and_no_path_into_the_repository() {
    let root = repo();
    let sdk_copies: [(&str, &[(&str, &str)]); 5] = [
        ("rust", &[("udf-sdk/src", "guest-sdk/src"), ("udf-sdk/examples", "guest-sdk/examples")]),
        ("c", &[("sdk", "guest-sdk/c")]),
        ("zig", &[("sdk", "guest-sdk/c"), ("sdk", "guest-sdk/zig")]),
        ("python", &[("src", "guest-sdk/python")]),
        ("js", &[("src", "guest-sdk/js")]),
    ];
    for (lang, copies) in sdk_copies {
        let dir = tempfile::tempdir().unwrap();
        let project = dir.path().join("my-plugin");
        new(&[project.to_str().unwrap(), "--lang", lang, "--template", "masks"]).unwrap();
        let wit = std::fs::read(project.join("wit/udf.wit")).unwrap();
        assert_eq!(wit, std::fs::read(root.join("wit/udf.wit")).unwrap(), "{lang}: the contract");
        for (copy, original) in copies {
            for entry in std::fs::read_dir(root.join(original)).unwrap() {
                let file = entry.unwrap().path();
                // Only the SDK's files: building Python plugins leaves a __pycache__ folder.
                if !file.is_file() {
                    continue;
                }
                let copied = project.join(copy).join(file.file_name().unwrap());
                let copied = std::fs::read(&copied).unwrap_or_else(|e| panic!("{lang}: {}: {e}", copied.display()));
                assert_eq!(copied, std::fs::read(&file).unwrap(), "{lang}: {}", file.display());
            }
        }
        let root_text = root.display().to_string();
        for file in files(&project) {
            let text = std::fs::read_to_string(project.join(&file)).unwrap();
            assert!(!text.contains(&root_text), "{lang}: {} names the repository", file.display());
            assert!(!text.contains("{{"), "{lang}: {} has a placeholder left", file.display());
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt;
                let mode = std::fs::metadata(project.join(&file)).unwrap().permissions().mode();
                assert_eq!(mode & 0o100 != 0, file.extension().is_some_and(|e| e == "sh"), "{}", file.display());
            }
        }
        for script in ["build.sh", "test.sh"] {
            assert!(project.join(script).is_file(), "{lang}: {script}");
        }
        // Nothing else was written beside the project (no staging folder left behind).
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}

#[test]
fn new_refuses_an_existing_folder_a_bad_name_and_a_missing_parent() {
    let dir = tempfile::tempdir().unwrap();
    let existing = dir.path().join("my-sum");
    std::fs::create_dir(&existing).unwrap();
    std::fs::write(existing.join("precious.txt"), "keep me").unwrap();
    let (code, msg) = new(&[existing.to_str().unwrap(), "--lang", "rust"]).unwrap_err();
    assert_eq!(code, exit::USER_ERROR);
    assert!(msg.contains("my-sum already exists"), "{msg}");
    assert_eq!(files(&existing), vec![PathBuf::from("precious.txt")]);
    assert_eq!(std::fs::read_to_string(existing.join("precious.txt")).unwrap(), "keep me");

    for bad in ["My-Sum", "2sum", "my sum", "sum-", "udf-sdk"] {
        let (code, msg) = new(&[dir.path().join(bad).to_str().unwrap(), "--lang", "c"]).unwrap_err();
        assert_eq!(code, exit::USER_ERROR, "{bad}");
        assert!(msg.contains(&format!("'{bad}'")), "{bad}: {msg}");
    }
    let (code, msg) = new(&[dir.path().join("no/such/my-sum").to_str().unwrap(), "--lang", "zig"]).unwrap_err();
    assert_eq!(code, exit::USER_ERROR);
    assert!(msg.contains("is not a folder"), "{msg}");
    let (code, msg) = new(&[dir.path().join("x").to_str().unwrap(), "--lang", "cobol"]).unwrap_err();
    assert_eq!(code, exit::USER_ERROR);
    assert!(msg.contains("cobol"), "{msg}");
    // Only the folder that was there before.
    assert_eq!(files(dir.path()), vec![PathBuf::from("my-sum/precious.txt")]);
}
