//! `cargo xtask dist`: assembles the deployable Functions app root in `target/dist/`.
//!
//! The app root is what `func start` runs locally and `func azure functionapp publish`
//! deploys: `host.json`, one folder per function holding its `function.json` (from
//! `function-defs/`), and the release `handler` binary. The Kafka SASL mechanism is an
//! enum the Kafka extension does not resolve from app settings, so it is chosen here
//! (`--kafka-auth-mode`, default `Plain`) and written into the Kafka bindings.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};
use serde_json::Value;

/// The target a Functions Linux host runs without caring about its glibc.
const MUSL_TARGET: &str = "x86_64-unknown-linux-musl";
/// SASL mechanisms the Kafka extension accepts: its `BrokerAuthenticationMode` members but `NotSet` (a test holds
/// them to `tests/fixtures/platform/function-bindings.json`).
const KAFKA_AUTH_MODES: &[&str] = &[
    "Plain",
    "ScramSha256",
    "ScramSha512",
    "Gssapi",
    "OAuthBearer",
];

const USAGE: &str =
    "usage: cargo xtask dist [--kafka-auth-mode Plain|ScramSha256|ScramSha512|Gssapi|OAuthBearer]";

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("dist") => {
            let options = DistOptions::parse(&args[1..])?;
            dist(&options)
        }
        _ => bail!("{USAGE}"),
    }
}

/// Choices that change the assembled app root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DistOptions {
    pub kafka_auth_mode: String,
}

impl DistOptions {
    fn parse(args: &[String]) -> Result<DistOptions> {
        let mut options = DistOptions {
            kafka_auth_mode: "Plain".to_owned(),
        };
        let mut args = args.iter();
        while let Some(arg) = args.next() {
            match arg.as_str() {
                "--kafka-auth-mode" => {
                    let mode = args
                        .next()
                        .with_context(|| format!("--kafka-auth-mode needs a value\n{USAGE}"))?;
                    if !KAFKA_AUTH_MODES.contains(&mode.as_str()) {
                        bail!("unknown Kafka authentication mode {mode:?}\n{USAGE}");
                    }
                    options.kafka_auth_mode = mode.clone();
                }
                other => bail!("unknown argument {other:?}\n{USAGE}"),
            }
        }
        Ok(options)
    }
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

fn dist(options: &DistOptions) -> Result<()> {
    let root = workspace_root();
    let binary = build_release_handler(&root)?;
    let out = root.join("target").join("dist");
    assemble(&root, &binary, &out, options)?;
    println!("assembled {}", out.display());
    Ok(())
}

/// Builds the release `handler` for musl when that target is installed, else for the
/// host, saying which; returns the binary's path.
fn build_release_handler(root: &Path) -> Result<PathBuf> {
    let target = if musl_target_installed() {
        Some(MUSL_TARGET)
    } else {
        None
    };
    match target {
        Some(t) => println!("building the release handler for {t}"),
        None => println!(
            "building the release handler for the host target ({MUSL_TARGET} is not installed)"
        ),
    }
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let mut build = Command::new(cargo);
    build.current_dir(root).args([
        "build",
        "--release",
        "-p",
        "stormgate-handlers",
        "--bin",
        "handler",
    ]);
    if let Some(t) = target {
        build.args(["--target", t]);
    }
    let status = build.status().context("could not run cargo build")?;
    if !status.success() {
        bail!("cargo build of the release handler failed ({status})");
    }
    let release_dir = match target {
        Some(t) => root.join("target").join(t).join("release"),
        None => root.join("target").join("release"),
    };
    Ok(release_dir.join("handler"))
}

fn musl_target_installed() -> bool {
    Command::new("rustup")
        .args(["target", "list", "--installed"])
        .output()
        .is_ok_and(|out| {
            out.status.success()
                && String::from_utf8_lossy(&out.stdout)
                    .lines()
                    .any(|l| l.trim() == MUSL_TARGET)
        })
}

/// Lays out the app root in `out` (replacing what was there): `root/host.json`, one folder
/// per function of `root/function-defs/` with its `function.json`, and `binary` as `handler`.
/// A `local.settings.json` at the repository root is copied too, for `func start`.
pub fn assemble(root: &Path, binary: &Path, out: &Path, options: &DistOptions) -> Result<()> {
    let defs = root.join("function-defs");
    if out.exists() {
        fs::remove_dir_all(out).with_context(|| format!("could not clear {}", out.display()))?;
    }
    fs::create_dir_all(out)?;
    copy(&root.join("host.json"), &out.join("host.json"))?;
    for function in function_folders(&defs)? {
        let definition = defs.join(&function).join("function.json");
        let text = fs::read_to_string(&definition)
            .with_context(|| format!("reading {}", definition.display()))?;
        let rendered = with_kafka_auth_mode(&text, &options.kafka_auth_mode)
            .with_context(|| format!("{} is not valid JSON", definition.display()))?;
        fs::create_dir_all(out.join(&function))?;
        fs::write(out.join(&function).join("function.json"), rendered)?;
    }
    copy(binary, &out.join("handler"))?;
    make_executable(&out.join("handler"))?;
    let local_settings = root.join("local.settings.json");
    if local_settings.exists() {
        copy(&local_settings, &out.join("local.settings.json"))?;
    }
    Ok(())
}

/// The names of the function folders (each holding a `function.json`), sorted.
fn function_folders(defs: &Path) -> Result<Vec<String>> {
    let mut names = Vec::new();
    for entry in fs::read_dir(defs).with_context(|| format!("reading {}", defs.display()))? {
        let entry = entry?;
        if entry.file_type()?.is_dir() {
            let name = entry
                .file_name()
                .into_string()
                .map_err(|n| anyhow::anyhow!("non-UTF-8 folder {n:?}"))?;
            if !entry.path().join("function.json").exists() {
                bail!("function-defs/{name} has no function.json");
            }
            names.push(name);
        }
    }
    names.sort();
    Ok(names)
}

/// `function.json` text with every Kafka binding's `authenticationMode` set to `mode`.
fn with_kafka_auth_mode(text: &str, mode: &str) -> Result<String> {
    let mut definition: Value = serde_json::from_str(text)?;
    if let Some(bindings) = definition.get_mut("bindings").and_then(Value::as_array_mut) {
        for binding in bindings {
            let is_kafka = matches!(
                binding.get("type").and_then(Value::as_str),
                Some("kafka" | "kafkaTrigger")
            );
            if is_kafka {
                binding["authenticationMode"] = Value::String(mode.to_owned());
            }
        }
    }
    Ok(serde_json::to_string_pretty(&definition)? + "\n")
}

fn copy(from: &Path, to: &Path) -> Result<()> {
    fs::copy(from, to)
        .with_context(|| format!("copying {} to {}", from.display(), to.display()))?;
    Ok(())
}

#[cfg(unix)]
fn make_executable(path: &Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(path, fs::Permissions::from_mode(0o755))?;
    Ok(())
}

#[cfg(not(unix))]
fn make_executable(_path: &Path) -> Result<()> {
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    /// A fresh directory under the system temp dir, removed when dropped.
    struct TempDir(PathBuf);

    impl TempDir {
        fn new(label: &str) -> TempDir {
            let unique = format!(
                "stormgate-xtask-{label}-{}-{:?}",
                std::process::id(),
                std::time::Instant::now()
            );
            let path = std::env::temp_dir().join(unique.replace([' ', ':', '.'], "_"));
            fs::create_dir_all(&path).unwrap();
            TempDir(path)
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    fn assemble_with_fake_binary(options: &DistOptions) -> (TempDir, PathBuf) {
        let scratch = TempDir::new("dist");
        let binary = scratch.0.join("built-handler");
        fs::write(&binary, b"#!/bin/sh\necho handler\n").unwrap();
        let out = scratch.0.join("dist");
        fs::create_dir_all(out.join("stale-function")).unwrap();
        assemble(&workspace_root(), &binary, &out, options).unwrap();
        (scratch, out)
    }

    #[test]
    fn dist_holds_host_json_every_function_and_an_executable_handler() {
        let (_scratch, out) = assemble_with_fake_binary(&DistOptions {
            kafka_auth_mode: "Plain".into(),
        });
        let host: Value =
            serde_json::from_str(&fs::read_to_string(out.join("host.json")).unwrap()).unwrap();
        assert_eq!(
            host["customHandler"]["description"]["defaultExecutablePath"],
            "handler"
        );

        let defs = workspace_root().join("function-defs");
        let expected: BTreeSet<String> = function_folders(&defs).unwrap().into_iter().collect();
        let assembled: BTreeSet<String> = fs::read_dir(&out)
            .unwrap()
            .map(|e| e.unwrap())
            .filter(|e| e.file_type().unwrap().is_dir())
            .map(|e| e.file_name().into_string().unwrap())
            .collect();
        assert_eq!(
            assembled, expected,
            "stale folders are removed, every function is present"
        );
        assert!(expected.contains("classify") && expected.contains("summarize-premium"));
        for function in &expected {
            let text = fs::read_to_string(out.join(function).join("function.json")).unwrap();
            let definition: Value = serde_json::from_str(&text).unwrap();
            assert!(definition["bindings"].is_array(), "{function}");
        }

        let handler = out.join("handler");
        assert_eq!(fs::read(&handler).unwrap(), b"#!/bin/sh\necho handler\n");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(
                fs::metadata(&handler).unwrap().permissions().mode() & 0o111,
                0o111,
                "handler is executable"
            );
        }
    }

    #[test]
    fn the_kafka_authentication_mode_is_written_into_every_kafka_binding() {
        let (_scratch, out) = assemble_with_fake_binary(&DistOptions {
            kafka_auth_mode: "ScramSha512".into(),
        });
        // The trigger of classify, and the notifications output of dispatch and of the
        // two tier workers.
        let mut kafka = Vec::new();
        for function in [
            "classify",
            "dispatch",
            "summarize-premium",
            "summarize-standard",
        ] {
            let definition: Value = serde_json::from_str(
                &fs::read_to_string(out.join(function).join("function.json")).unwrap(),
            )
            .unwrap();
            kafka.extend(
                definition["bindings"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter(|b| b["type"] == "kafkaTrigger" || b["type"] == "kafka")
                    .cloned(),
            );
        }
        assert_eq!(kafka.len(), 4);
        assert!(
            kafka
                .iter()
                .all(|b| b["authenticationMode"] == "ScramSha512")
        );
    }

    #[test]
    fn auth_modes_offered_are_the_kafka_extensions_own_enum_members() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/fixtures/platform/function-bindings.json");
        let table: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let mut members: Vec<&str> = table["enums"]["BrokerAuthenticationMode"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|v| v.as_str())
            .filter(|member| *member != "NotSet")
            .collect();
        members.sort_unstable();
        let mut offered = KAFKA_AUTH_MODES.to_vec();
        offered.sort_unstable();
        assert_eq!(offered, members);
    }

    #[test]
    fn unknown_arguments_and_auth_modes_are_refused() {
        assert!(DistOptions::parse(&["--kafka-auth-mode".into(), "Basic".into()]).is_err());
        assert!(DistOptions::parse(&["--release".into()]).is_err());
        assert_eq!(DistOptions::parse(&[]).unwrap().kafka_auth_mode, "Plain");
    }
}
