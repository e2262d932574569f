//! The command line as a process (tests/src/bin/udf-host-cli.rs): `--version`, shell
//! completions, and output into a pipe that nobody reads any more.

use std::path::Path;
use std::process::{Command, Output, Stdio};

fn udf_host(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_udf-host-cli")).args(args).output().expect("run udf-host-cli")
}

fn repo_file(path: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(path)).unwrap()
}

#[test]
fn version_names_the_contract_and_the_features() {
    let output = udf_host(&["--version"]);
    assert!(output.status.success());
    let text = String::from_utf8(output.stdout).unwrap();
    // The contract version as the WIT file declares it.
    let wit = repo_file("wit/udf.wit");
    let package = wit.lines().find_map(|l| l.trim().strip_prefix("package ")).unwrap().trim_end_matches(';');
    assert!(text.contains(&format!("contract: {package}\n")), "{text}");
    // Features: `none`, or features that host/Cargo.toml declares.
    let manifest = repo_file("host/Cargo.toml");
    let declared: Vec<&str> = manifest
        .lines()
        .skip_while(|l| l.trim() != "[features]")
        .skip(1)
        .take_while(|l| !l.starts_with('['))
        .filter_map(|l| l.split_once('=').map(|(key, _)| key.trim()))
        .collect();
    let features = text.lines().find_map(|l| l.strip_prefix("features: ")).expect("a features line");
    if features != "none" {
        for feature in features.split(", ") {
            assert!(declared.contains(&feature), "{feature} is not a feature of host/Cargo.toml");
        }
    }
    assert!(text.starts_with(&format!("udf-host {}\n", env!("CARGO_PKG_VERSION"))), "{text}");
}

#[test]
fn completions_for_bash_zsh_and_fish_know_the_subcommands() {
    for (shell, marker) in
        [("bash", "complete -F _udf__host"), ("zsh", "#compdef udf-host"), ("fish", "complete -c udf-host")]
    {
        let output = udf_host(&["completions", shell]);
        assert!(output.status.success(), "{shell}: {}", String::from_utf8_lossy(&output.stderr));
        let script = String::from_utf8(output.stdout).unwrap();
        assert!(script.contains(marker), "{shell}: no {marker}");
        for word in ["run", "conformance", "new", "completions", "template", "frame-map"] {
            assert!(script.contains(word), "{shell}: no {word}");
        }
        // The script parses in its shell, where that shell is installed.
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("completion");
        std::fs::write(&file, &script).unwrap();
        let no_execute = if shell == "fish" { "--no-execute" } else { "-n" };
        match Command::new(shell).arg(no_execute).arg(&file).output() {
            Ok(out) => assert!(out.status.success(), "{shell}: {}", String::from_utf8_lossy(&out.stderr)),
            Err(e) => eprintln!("{shell} is not installed ({e}): its completion script was not parsed"),
        }
    }
    let output = udf_host(&["completions", "powershell"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&output.stderr).contains("powershell"));
}

/// `udf-host list | head`: the reader is gone before udf-host writes. `println!` panicked
/// ("failed printing to stdout: Broken pipe"); a closed pipe must end the program quietly.
#[test]
fn writing_into_a_closed_pipe_exits_quietly() {
    for args in [&["list"][..], &["list", "--json"], &["inspect", "builtin:sum"], &["completions", "bash"]] {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let output = Command::new(env!("CARGO_BIN_EXE_udf-host-cli"))
            .args(args)
            .stdout(writer)
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.is_empty(), "{args:?} wrote to stderr: {stderr}");
        assert_eq!(output.status.code(), Some(0), "{args:?}");
    }
}
