//! The processes under test: a throwaway local `redis-server`, the release `handler`
//! with the settings it needs to serve `/classify`, and what Linux reports about them
//! (CPU time from the scheduler, peak RSS).

use std::net::{Ipv4Addr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::process::{Child, Command};

const READY_TIMEOUT: Duration = Duration::from_secs(20);

/// A local port nothing listens on at the moment of asking.
pub fn free_port() -> anyhow::Result<u16> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
    Ok(listener.local_addr()?.port())
}

/// A `redis-server` on loopback, persistence off, killed on drop.
pub struct RedisProcess {
    child: Child,
    pub port: u16,
}

impl RedisProcess {
    pub async fn start(binary: &Path) -> anyhow::Result<Self> {
        let port = free_port()?;
        let child = Command::new(binary)
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no", "--loglevel", "warning"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("cannot start {}", binary.display()))?;
        let process = RedisProcess { child, port };
        let started = Instant::now();
        while started.elapsed() < READY_TIMEOUT {
            if let Ok(mut conn) = process.connection().await
                && redis::cmd("PING")
                    .query_async::<String>(&mut conn)
                    .await
                    .is_ok()
            {
                return Ok(process);
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        bail!("redis-server did not answer PING on port {port}")
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    pub async fn connection(&self) -> anyhow::Result<redis::aio::MultiplexedConnection> {
        let client = redis::Client::open(self.url())?;
        Ok(client.get_multiplexed_async_connection().await?)
    }
}

/// `INFO <section>` field `name` as a number.
pub async fn redis_info(
    conn: &mut redis::aio::MultiplexedConnection,
    section: &str,
    name: &str,
) -> anyhow::Result<f64> {
    let info: String = redis::cmd("INFO").arg(section).query_async(conn).await?;
    info.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':')?.trim().parse().ok())
        .with_context(|| format!("INFO {section} has no {name}"))
}

/// A running `handler` process; killed on drop.
pub struct HandlerProcess {
    child: Child,
    pub port: u16,
}

impl HandlerProcess {
    /// Spawns the handler pointed at `redis_url`; returns at once (see [`Self::wait_ready`]).
    pub fn spawn(binary: &Path, redis_url: &str, rust_log: &str) -> anyhow::Result<Self> {
        let port = free_port()?;
        let child = Command::new(binary)
            .env_clear()
            .envs(handler_settings(port, redis_url, rust_log))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("cannot start {}", binary.display()))?;
        Ok(HandlerProcess { child, port })
    }

    /// Polls `GET /` until it answers 200; the time from `since` to that answer.
    pub async fn wait_ready(&mut self, since: Instant) -> anyhow::Result<Duration> {
        while since.elapsed() < READY_TIMEOUT {
            if let Some(status) = self.child.try_wait()? {
                bail!("handler exited during start-up: {status}");
            }
            if answers_root(self.port).await {
                return Ok(since.elapsed());
            }
            tokio::time::sleep(Duration::from_micros(200)).await;
        }
        bail!("handler did not answer GET / within {READY_TIMEOUT:?}")
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    pub async fn stop(mut self) {
        // A load test's handler holds nothing worth draining.
        let _ = self.child.kill().await;
    }
}

/// The settings the handler refuses to start without; the OpenAI endpoint is never
/// called by `/classify`.
fn handler_settings(port: u16, redis_url: &str, rust_log: &str) -> Vec<(String, String)> {
    let mut settings: Vec<(String, String)> = [
        ("FUNCTIONS_CUSTOMHANDLER_PORT", port.to_string()),
        ("STORMGATE_REDIS_URL", redis_url.to_owned()),
        (
            "AZURE_OPENAI_ENDPOINT",
            "https://loadtest.openai.azure.com/".into(),
        ),
        ("AZURE_OPENAI_AUTH", "api_key".into()),
        ("AZURE_OPENAI_API_KEY", "not-used-by-classify".into()),
        ("STORMGATE_PREMIUM_DEPLOYMENT", "premium".into()),
        ("STORMGATE_PREMIUM_MODEL", "gpt-4o".into()),
        ("STORMGATE_PREMIUM_TPM", "30000".into()),
        ("STORMGATE_STANDARD_DEPLOYMENT", "standard".into()),
        ("STORMGATE_STANDARD_MODEL", "gpt-4o-mini".into()),
        ("STORMGATE_STANDARD_TPM", "100000".into()),
        ("STORMGATE_LOG_FORMAT", "json".into()),
        ("RUST_LOG", rust_log.to_owned()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    if let Ok(path) = std::env::var("PATH") {
        settings.push(("PATH".into(), path));
    }
    settings
}

async fn answers_root(port: u16) -> bool {
    let Ok(mut stream) = TcpStream::connect((Ipv4Addr::LOCALHOST, port)).await else {
        return false;
    };
    let request = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
    if stream.write_all(request).await.is_err() {
        return false;
    }
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).await.is_ok() && &head == b"HTTP/1.1 200"
}

/// The `handler` binary next to this executable (both are built into the same directory).
pub fn sibling_handler() -> anyhow::Result<PathBuf> {
    let me = std::env::current_exe()?;
    let dir = me.parent().context("executable has no directory")?;
    Ok(dir.join("handler"))
}

/// CPU time all threads of `pid` have run (Linux scheduler statistics, nanoseconds).
pub fn cpu_time(pid: u32) -> Option<Duration> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    let nanos: u64 = tasks
        .filter_map(|t| {
            let stat = std::fs::read_to_string(t.ok()?.path().join("schedstat")).ok()?;
            stat.split_whitespace().next()?.parse::<u64>().ok()
        })
        .sum();
    Some(Duration::from_nanos(nanos))
}

/// A `/proc/<pid>/status` field in kB (`VmHWM` is the peak resident set).
pub fn status_kb(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status.lines().find_map(|l| {
        l.strip_prefix(field)?
            .strip_prefix(':')?
            .split_whitespace()
            .next()?
            .parse()
            .ok()
    })
}

/// The machine: CPU model, cores, and the 1-minute load average now.
pub fn machine() -> (String, usize, String) {
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines().find_map(|l| {
                Some(
                    l.strip_prefix("model name")?
                        .split_once(':')?
                        .1
                        .trim()
                        .to_owned(),
                )
            })
        })
        .unwrap_or_else(|| "unknown".into());
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    (model, cores, load_average())
}

pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}
