//! The `handler` process as the Functions host runs it: started with app settings in
//! its environment on a port of its own, polled on `GET /` until it answers, and
//! killed with SIGKILL (no draining, no flushing) and started again when a test says so.
//!
//! Tests pass the binary (`env!("CARGO_BIN_EXE_handler-under-test")`, this crate's
//! build of `handlers/src/bin/handler.rs` with the test hooks). What the process logs
//! goes to a file, so a failing test can show its last lines.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::collections::BTreeMap;
use std::fs::File;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use stormgate_handlers::config::Settings;

/// How long a handler may take to answer `GET /` (the host allows 60 s).
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// A running handler process; killed when dropped.
pub struct HandlerProcess {
    binary: PathBuf,
    vars: BTreeMap<String, String>,
    log: PathBuf,
    child: KillSwitch,
    port: u16,
    starts: u32,
}

impl HandlerProcess {
    /// The smallest valid settings for local services, with `overrides` on top.
    pub fn settings(overrides: &[(&str, &str)]) -> BTreeMap<String, String> {
        let mut vars: BTreeMap<String, String> = Settings::example_vars()
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        vars.insert("RUST_LOG".into(), "info".into());
        for (k, v) in overrides {
            vars.insert((*k).to_owned(), (*v).to_owned());
        }
        vars
    }

    /// Starts `binary` with exactly `vars` as its environment and waits until it answers.
    pub async fn start(
        binary: impl AsRef<Path>,
        vars: BTreeMap<String, String>,
        log: PathBuf,
    ) -> HandlerProcess {
        let mut process = HandlerProcess {
            binary: binary.as_ref().to_owned(),
            vars,
            log,
            child: KillSwitch::default(),
            port: 0,
            starts: 0,
        };
        process.spawn().await;
        process
    }

    /// `http://127.0.0.1:<port>`, where the host sends invocations.
    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// SIGKILL: the process gets no chance to finish or flush anything.
    pub fn kill(&mut self) {
        self.child.fire();
    }

    /// A handle that kills the current run from anywhere (e.g. while a call to it is
    /// in flight).
    pub fn kill_switch(&self) -> KillSwitch {
        self.child.clone()
    }

    /// Starts the process again with the same settings, as the host does after a crash
    /// (on a new port, like a new instance), and waits until it answers.
    pub async fn restart(&mut self) {
        self.kill();
        self.spawn().await;
    }

    /// The last `lines` lines the process (all its runs) wrote.
    pub fn log_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    async fn spawn(&mut self) {
        self.port = free_port();
        self.starts += 1;
        let log = File::options()
            .create(true)
            .append(true)
            .open(&self.log)
            .expect("open the handler's log file");
        let child = Command::new(&self.binary)
            .env_clear()
            .envs(&self.vars)
            .env("FUNCTIONS_CUSTOMHANDLER_PORT", self.port.to_string())
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log file handle"))
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", self.binary.display()));
        *self.child.0.lock().unwrap() = Some(child);
        self.wait_until_answering().await;
    }

    async fn wait_until_answering(&mut self) {
        let client = reqwest::Client::new();
        let started = Instant::now();
        loop {
            if client.get(self.base_url()).send().await.is_ok() {
                return;
            }
            let exited = self
                .child
                .0
                .lock()
                .unwrap()
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten());
            if let Some(status) = exited {
                panic!(
                    "the handler exited with {status} at start {}:\n{}",
                    self.starts,
                    self.log_tail(20)
                );
            }
            assert!(
                started.elapsed() < START_TIMEOUT,
                "the handler did not answer GET / within {START_TIMEOUT:?}:\n{}",
                self.log_tail(20)
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for HandlerProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Kills the handler's current run with SIGKILL and reaps it.
#[derive(Debug, Clone, Default)]
pub struct KillSwitch(Arc<Mutex<Option<Child>>>);

impl KillSwitch {
    pub fn fire(&self) {
        if let Some(mut child) = self.0.lock().unwrap().take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free local port")
}
