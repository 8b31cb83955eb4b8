//! Architecture invariants checked mechanically, so they stay true as the code changes.
//!
//! ARCHITECTURE.md states them; these tests fail the build when one is broken:
//! `shared` never reads the clock or the environment and knows no HTTP, every Rust
//! module says its role in a `//!` header, no module hides behind a vague name, and no
//! test file is left out of its crate's test binary.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::fs;
use std::path::{Path, PathBuf};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ sits inside the repository")
        .to_path_buf()
}

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in fs::read_dir(&d).unwrap_or_else(|e| panic!("read {}: {e}", d.display())) {
            let path = entry.expect("directory entry").path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// Lines of code outside comments, for looking for forbidden calls.
fn code_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.trim_start()))
        .filter(|(_, l)| !l.starts_with("//"))
}

/// What reads the wall clock or the process environment, in `dir` outside `skip`.
fn clock_or_environment_reads(dir: &str, skip: &[&str]) -> Vec<String> {
    let forbidden = [
        "SystemTime::now",
        "Instant::now",
        "Utc::now",
        "Timestamp::now",
        "Zoned::now",
        "std::env::var",
        "env::var(",
        "env::vars(",
        "std::env::args",
    ];
    let skip: Vec<PathBuf> = skip.iter().map(|s| repo_root().join(dir).join(s)).collect();
    let mut found = Vec::new();
    for file in rust_files(&repo_root().join(dir)) {
        if skip.iter().any(|s| file.starts_with(s)) {
            continue;
        }
        let text = fs::read_to_string(&file).expect("read source");
        for (n, line) in code_lines(&text) {
            for f in forbidden {
                if line.contains(f) {
                    found.push(format!("{}:{n}: {f}", file.display()));
                }
            }
        }
    }
    found
}

#[test]
fn shared_never_reads_the_clock_or_the_environment() {
    // `testing/` is the feature-gated harness that starts a real redis-server for
    // tests; waiting for a process to come up is real time by nature.
    let found = clock_or_environment_reads("shared/src", &["testing"]);
    assert!(
        found.is_empty(),
        "shared must take time from clock::Clock and settings as values:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_storm_lab_never_reads_the_clock_or_the_environment() {
    // The replay runs the product on virtual time: a wall-clock read would make a result
    // depend on the machine. The host emulation, `stormgate local` and the simulator's
    // HTTP server run in real time by nature (through the handler's `SystemClock`).
    let found =
        clock_or_environment_reads("lab/src", &["functions_host", "local", "simulator_http.rs"]);
    assert!(
        found.is_empty(),
        "the storm lab must take time from its virtual clock and settings as values:\n{}",
        found.join("\n")
    );
}

#[test]
fn shared_depends_on_no_http_stack() {
    let manifest =
        fs::read_to_string(repo_root().join("shared/Cargo.toml")).expect("read manifest");
    let deps = manifest
        .split("[dependencies]")
        .nth(1)
        .and_then(|rest| rest.split("\n[").next())
        .expect("shared has a [dependencies] table");
    for http in ["axum", "reqwest", "hyper", "tower", "azure_core"] {
        assert!(
            !deps.lines().any(|l| l.trim_start().starts_with(http)),
            "shared/Cargo.toml depends on {http}: HTTP belongs in handlers"
        );
    }
}

#[test]
fn every_module_opens_with_a_doc_comment_saying_its_role() {
    let mut missing = Vec::new();
    for dir in [
        "shared/src",
        "handlers/src",
        "lab/src",
        "cli/src",
        "tests/src",
        "xtask/src",
    ] {
        for file in rust_files(&repo_root().join(dir)) {
            let text = fs::read_to_string(&file).expect("read source");
            let first = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
            if !first.starts_with("//!") {
                missing.push(file.display().to_string());
            }
        }
    }
    assert!(
        missing.is_empty(),
        "modules without a //! header:\n{}",
        missing.join("\n")
    );
}

#[test]
fn no_module_is_named_utils_or_helpers() {
    let vague = ["utils", "util", "helpers", "helper", "misc", "common"];
    let mut found = Vec::new();
    for dir in [
        "shared/src",
        "handlers/src",
        "lab/src",
        "cli/src",
        "tests/src",
    ] {
        for file in rust_files(&repo_root().join(dir)) {
            let stem = file.file_stem().and_then(|s| s.to_str()).unwrap_or("");
            let parent = file
                .parent()
                .and_then(|p| p.file_name())
                .and_then(|s| s.to_str())
                .unwrap_or("");
            if vague.contains(&stem) || (stem == "mod" && vague.contains(&parent)) {
                found.push(file.display().to_string());
            }
        }
    }
    assert!(
        found.is_empty(),
        "name modules for what they do:\n{}",
        found.join("\n")
    );
}

#[test]
fn only_the_end_to_end_tests_turn_the_fault_injection_hooks_on() {
    // The mechanism switches and the movable clock must never reach a shipped build:
    // the feature may be defined, and enabled by tests/'s dev-dependencies, nowhere else.
    let mut found = Vec::new();
    for manifest in [
        "Cargo.toml",
        "shared/Cargo.toml",
        "handlers/Cargo.toml",
        "lab/Cargo.toml",
        "cli/Cargo.toml",
        "tests/Cargo.toml",
        "xtask/Cargo.toml",
    ] {
        let text = fs::read_to_string(repo_root().join(manifest)).expect("read manifest");
        let mut section = String::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.starts_with('[') {
                section = line.to_owned();
                continue;
            }
            if line.starts_with('#') || !line.contains("fault-injection") {
                continue;
            }
            let defined = section == "[features]" && line.starts_with("fault-injection =");
            let tests_only = manifest == "tests/Cargo.toml" && section == "[dev-dependencies]";
            if !(defined || tests_only) {
                found.push(format!("{manifest}:{}: {line} (in {section})", n + 1));
            }
        }
    }
    assert!(
        found.is_empty(),
        "fault-injection enabled outside the tests' dev-dependencies:\n{}",
        found.join("\n")
    );
}

/// With `autotests = false`, a test file that `tests/main.rs` does not declare is never
/// compiled: its tests would silently stop running.
#[test]
fn every_test_file_is_a_module_of_its_crates_test_binary() {
    let mut undeclared = Vec::new();
    for dir in [
        "shared/tests",
        "handlers/tests",
        "lab/tests",
        "cli/tests",
        "tests/tests",
    ] {
        let dir = repo_root().join(dir);
        let main = fs::read_to_string(dir.join("main.rs")).expect("tests/main.rs");
        let declared: Vec<&str> = main
            .lines()
            .filter_map(|l| l.trim().strip_prefix("mod ")?.strip_suffix(';'))
            .collect();
        for entry in fs::read_dir(&dir).expect("read tests/") {
            let path = entry.expect("directory entry").path();
            let module = if path.is_dir() && path.join("mod.rs").is_file() {
                path.file_name().and_then(|n| n.to_str())
            } else if path.extension().is_some_and(|e| e == "rs") {
                path.file_stem().and_then(|n| n.to_str())
            } else {
                None
            };
            if module.is_some_and(|m| m != "main" && !declared.contains(&m)) {
                undeclared.push(path.display().to_string());
            }
        }
    }
    assert!(
        undeclared.is_empty(),
        "test files not declared in their crate's tests/main.rs (never compiled):\n{}",
        undeclared.join("\n")
    );
}

mod module_graph;

/// Cycles that were there when the check came, each to be broken by moving what both
/// sides need to where it belongs: `(crate, scope, members)`. The check fails on any
/// cycle not listed (a new one, or a listed one that grew) and on a listed one that is
/// gone, so this list only shrinks.
const CYCLES_YET_TO_BREAK: &[(&str, &str, &[&str])] = &[];

#[test]
fn no_modules_of_a_crate_import_each_other() {
    // A cycle makes two modules one unit in all but name: neither can be read, tested
    // or moved without the other. Checked between the top-level modules of each crate
    // and between sibling files inside every module directory.
    let mut new = Vec::new();
    let mut still_there = Vec::new();
    for (name, src) in [
        ("stormgate-shared", "shared/src"),
        ("stormgate-handlers", "handlers/src"),
        ("stormgate-lab", "lab/src"),
        ("stormgate-cli", "cli/src"),
    ] {
        for cycle in module_graph::cycles(name, &module_graph::crate_graph(&repo_root(), src)) {
            let known = CYCLES_YET_TO_BREAK.iter().position(|(c, scope, members)| {
                *c == name && *scope == cycle.scope && *members == cycle.members.as_slice()
            });
            match known {
                Some(i) => still_there.push(i),
                None => new.push(cycle.detail),
            }
        }
    }
    assert!(
        new.is_empty(),
        "module import cycles (move what both need to where it belongs, so imports run one way):\n{}",
        new.join("\n")
    );
    let broken: Vec<String> = (0..CYCLES_YET_TO_BREAK.len())
        .filter(|i| !still_there.contains(i))
        .map(|i| format!("{:?}", CYCLES_YET_TO_BREAK[i]))
        .collect();
    assert!(
        broken.is_empty(),
        "these cycles are gone: take them off CYCLES_YET_TO_BREAK\n{}",
        broken.join("\n")
    );
}
