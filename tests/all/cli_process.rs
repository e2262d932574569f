//! The command line in a process of its own (this test binary, run again as a child), for
//! what an in-process test cannot see: the exit status after a signal, the peak memory
//! (RSS) of the process, Ctrl-C.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The environment variable that makes [`child_runs_the_command_line`] run a command.
const ARGS: &str = "UDF_HOST_TEST_CHILD_ARGS";

/// In a child process: run the command line given in [`ARGS`] (JSON) and exit with its
/// code, printing the error as the binary does. Does nothing in the normal test run.
#[test]
fn child_runs_the_command_line() {
    let Ok(json) = std::env::var(ARGS) else { return };
    let args: Vec<String> = serde_json::from_str(&json).expect("the child's arguments");
    let code = match udf_host::cli::execute(std::iter::once("udf-host".to_owned()).chain(args)) {
        Ok(()) => 0,
        Err(failure) => {
            eprintln!("error: {}", udf_host::cli::error_text(&failure.error));
            failure.code
        }
    };
    std::process::exit(code.into());
}

/// How a child process ended.
#[derive(Debug)]
pub(crate) struct Exit {
    /// The exit code, or `None` if a signal ended it.
    pub code: Option<i32>,
    /// Peak resident memory, in bytes.
    pub peak_rss: u64,
    pub elapsed: Duration,
    pub stderr: String,
}

/// A running child process of the command line.
pub(crate) struct Child {
    child: std::process::Child,
    started: Instant,
    stderr: tempfile::NamedTempFile,
}

/// Start `udf-host ARGS...` (the compiled-plugin cache of the tests added for `run` and
/// `conformance`) in a child process, with `env` set.
pub(crate) fn spawn(args: &[String], env: &[(&str, &Path)]) -> Child {
    let mut all = args.to_vec();
    if matches!(args.first().map(String::as_str), Some("run" | "conformance")) {
        all.extend(["--cache-dir".to_owned(), udf_host_tests::test_cache_dir().display().to_string()]);
    }
    let stderr = tempfile::NamedTempFile::new().unwrap();
    let mut command = Command::new(std::env::current_exe().unwrap());
    command
        .args(["--exact", "cli_process::child_runs_the_command_line", "--test-threads=1", "--nocapture", "-q"])
        .env(ARGS, serde_json::to_string(&all).unwrap())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr.reopen().unwrap());
    for (key, value) in env {
        command.env(key, value);
    }
    let started = Instant::now();
    Child { child: command.spawn().unwrap(), started, stderr }
}

impl Child {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// What the child wrote to stderr so far.
    pub fn stderr_so_far(&self) -> String {
        std::fs::read_to_string(self.stderr.path()).unwrap_or_default()
    }

    /// Wait for the child to end; its exit code, peak RSS (from the kernel's resource
    /// accounting of the process) and time.
    pub fn wait(self) -> Exit {
        let mut status = 0;
        // SAFETY: `rusage` is plain data the kernel fills in; the pid is our child's, not
        // waited for before (std's handle is not used to wait).
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        let pid = self.child.id() as libc::pid_t;
        // SAFETY: as above; `status` and `usage` are valid for writes.
        let waited = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
        assert_eq!(waited, pid, "wait4: {}", std::io::Error::last_os_error());
        let elapsed = self.started.elapsed();
        let code = libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status));
        let stderr = std::fs::read_to_string(self.stderr.path()).unwrap_or_default();
        // Linux reports kilobytes.
        Exit { code, peak_rss: usage.ru_maxrss as u64 * 1024, elapsed, stderr }
    }
}

/// Run `udf-host ARGS...` in a child process to the end.
pub(crate) fn run(args: &[&str]) -> Exit {
    let args: Vec<String> = args.iter().map(|s| (*s).to_owned()).collect();
    spawn(&args, &[]).wait()
}
