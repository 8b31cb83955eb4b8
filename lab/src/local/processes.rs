//! The processes `stormgate local` starts: a throwaway `redis-server` and the `handler`.
//!
//! Each runs in a process group of its own, so a Ctrl-C at the terminal reaches only
//! `stormgate local`, which then stops them in order; each is killed when its
//! [`Supervised`] is dropped (`kill_on_drop`), so an error or a panic on the way out
//! leaves nothing running either. Their output goes to log files in the run's folder.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use tokio::process::{Child, Command};

/// How long a started process may take to answer.
pub const START_TIMEOUT: Duration = Duration::from_secs(60);

/// A local port nothing listens on at the moment of asking.
pub fn free_port() -> anyhow::Result<u16> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
    Ok(listener.local_addr()?.port())
}

/// A child process in its own process group, killed when dropped.
#[derive(Debug)]
pub struct Supervised {
    pub name: &'static str,
    child: Child,
    pid: u32,
    pub log: PathBuf,
}

impl Supervised {
    /// Starts `program` with exactly `env` (plus `PATH`), output to `log`.
    pub fn spawn(
        name: &'static str,
        program: &Path,
        args: &[String],
        env: &BTreeMap<String, String>,
        log: PathBuf,
    ) -> anyhow::Result<Supervised> {
        let out = std::fs::File::create(&log)
            .with_context(|| format!("cannot create {}", log.display()))?;
        let mut command = Command::new(program);
        command
            .args(args)
            .env_clear()
            .envs(env)
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .kill_on_drop(true);
        if let Ok(path) = std::env::var("PATH") {
            command.env("PATH", path);
        }
        #[cfg(unix)]
        command.process_group(0);
        let child = command
            .spawn()
            .with_context(|| format!("cannot start {name} ({})", program.display()))?;
        let pid = child.id().context("a started process has no pid")?;
        Ok(Supervised {
            name,
            child,
            pid,
            log,
        })
    }

    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// `Some(status)` once the process has exited.
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// Kills the process (SIGKILL: nothing of a local run needs draining) and reaps it.
    pub async fn stop(&mut self) {
        let _ = self.child.kill().await;
    }

    /// The last `lines` lines the process wrote.
    pub fn log_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }
}

/// Whether a process with this pid still exists (and is not a zombie) on this machine.
pub fn is_running(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the command name in parentheses: "Z" is a zombie.
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X"),
        Err(_) => false,
    }
}

/// Starts a throwaway `redis-server` on a free loopback port, persistence off, and
/// waits until it answers PING. Returns the process and its URL.
pub async fn start_redis(binary: &Path, dir: &Path) -> anyhow::Result<(Supervised, String)> {
    let port = free_port()?;
    let args: Vec<String> = [
        "--port",
        &port.to_string(),
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--appendonly",
        "no",
        "--loglevel",
        "warning",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    let mut process = Supervised::spawn(
        "redis-server",
        binary,
        &args,
        &BTreeMap::new(),
        dir.join("redis-server.log"),
    )?;
    let url = format!("redis://127.0.0.1:{port}/");
    let client = redis::Client::open(url.as_str())?;
    let started = Instant::now();
    loop {
        if let Ok(mut conn) = client.get_multiplexed_async_connection().await
            && redis::cmd("PING")
                .query_async::<String>(&mut conn)
                .await
                .is_ok()
        {
            return Ok((process, url));
        }
        if let Some(status) = process.exited() {
            bail!(
                "redis-server exited at start ({status}):\n{}",
                process.log_tail(10)
            );
        }
        if started.elapsed() > START_TIMEOUT {
            bail!("redis-server did not answer PING on port {port}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Starts the `handler` with `settings` as its app settings on a free port and waits
/// until it answers `GET /`, as the host does. Returns the process and its base URL.
pub async fn start_handler(
    binary: &Path,
    settings: &BTreeMap<String, String>,
    dir: &Path,
) -> anyhow::Result<(Supervised, String)> {
    let port = free_port()?;
    let mut env = settings.clone();
    env.insert("FUNCTIONS_CUSTOMHANDLER_PORT".into(), port.to_string());
    let mut process = Supervised::spawn("handler", binary, &[], &env, dir.join("handler.log"))?;
    let base = format!("http://127.0.0.1:{port}");
    let client = reqwest::Client::new();
    let started = Instant::now();
    loop {
        if client.get(&base).send().await.is_ok() {
            return Ok((process, base));
        }
        if let Some(status) = process.exited() {
            bail!(
                "the handler exited at start ({status}):\n{}",
                process.log_tail(20)
            );
        }
        if started.elapsed() > START_TIMEOUT {
            bail!("the handler did not answer GET / within {START_TIMEOUT:?}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The `handler` binary next to this executable (cargo builds both into one folder).
pub fn sibling_handler() -> anyhow::Result<PathBuf> {
    let me = std::env::current_exe()?;
    let dir = me.parent().context("this executable has no folder")?;
    Ok(dir.join("handler"))
}

/// `name` on `PATH`, if there.
pub fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}
