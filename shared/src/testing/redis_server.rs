//! A throwaway `redis-server` for tests and benches: started on a free local port
//! with persistence off (or, for restart tests, AOF on in a directory the test owns),
//! ready once it answers PING, killed when dropped.
//!
//! Tests never skip for want of Redis: when `redis-server` is not installed,
//! [`RedisServer::start`] fails with a message saying so, and the test fails with it.

use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::store::redis::{Namespace, NamespaceParseError, RedisStore};

/// Where `redis-server` is looked for after `PATH`.
const FALLBACK_BINARIES: [&str; 2] = ["/usr/bin/redis-server", "/usr/local/bin/redis-server"];
/// Attempts at finding a port nobody grabs between our probe and the server's bind.
const PORT_ATTEMPTS: usize = 5;
const READY_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, thiserror::Error)]
pub enum RedisServerError {
    #[error(
        "redis-server is not installed (looked on PATH and in {FALLBACK_BINARIES:?}); \
         install it (e.g. `apt-get install redis-server`) to run the Redis tests"
    )]
    NotInstalled,
    #[error("could not start redis-server: {0}")]
    Spawn(#[source] io::Error),
    #[error("redis-server did not answer PING on port {port} within {waited:?}")]
    NotReady { port: u16, waited: Duration },
    #[error("test namespace or URL rejected: {0}")]
    Store(String),
    #[error("could not connect to redis-server: {0}")]
    Connect(String),
}

/// A running `redis-server` owned by the test; dropping it kills the process.
#[derive(Debug)]
pub struct RedisServer {
    child: Child,
    port: u16,
    /// Where the append-only file lives, when persistence is on.
    aof_dir: Option<PathBuf>,
    /// Further `--name value` settings it was started with (kept for a restart).
    extra: Vec<String>,
}

impl RedisServer {
    /// Starts a server on a free port and waits until it answers PING.
    pub fn start() -> Result<Self, RedisServerError> {
        let mut last_error = None;
        for _ in 0..PORT_ATTEMPTS {
            let port = Self::free_port()?;
            let mut server = RedisServer {
                child: spawn(port, None, &[])?,
                port,
                aof_dir: None,
                extra: Vec::new(),
            };
            match server.wait_ready() {
                Ok(()) => return Ok(server),
                // Most likely another process took the port first: try another.
                Err(e) => last_error = Some(e),
            }
        }
        Err(last_error.unwrap_or(RedisServerError::NotReady {
            port: 0,
            waited: Duration::ZERO,
        }))
    }

    /// Starts a server on `port` (e.g. one a store was pointed at before Redis was up).
    pub fn start_on(port: u16) -> Result<Self, RedisServerError> {
        let mut server = RedisServer {
            child: spawn(port, None, &[])?,
            port,
            aof_dir: None,
            extra: Vec::new(),
        };
        server.wait_ready()?;
        Ok(server)
    }

    /// Starts a server on a free port with further settings, e.g.
    /// `[("maxmemory", "2mb"), ("maxmemory-policy", "noeviction")]`.
    pub fn start_with(settings: &[(&str, &str)]) -> Result<Self, RedisServerError> {
        let extra: Vec<String> = settings
            .iter()
            .flat_map(|(name, value)| [format!("--{name}"), (*value).to_owned()])
            .collect();
        let port = Self::free_port()?;
        let mut server = RedisServer {
            child: spawn(port, None, &extra)?,
            port,
            aof_dir: None,
            extra,
        };
        server.wait_ready()?;
        Ok(server)
    }

    /// Starts a server with AOF persistence (`appendfsync everysec`, as the operations guide
    /// recommends) writing into `dir`, which the caller owns and removes.
    pub fn start_with_aof(dir: &Path) -> Result<Self, RedisServerError> {
        let port = Self::free_port()?;
        let mut server = RedisServer {
            child: spawn(port, Some(dir), &[])?,
            port,
            aof_dir: Some(dir.to_owned()),
            extra: Vec::new(),
        };
        server.wait_ready()?;
        Ok(server)
    }

    /// Kills the server (SIGKILL: no chance to flush) and starts it again on the same port
    /// and, if it had one, the same AOF directory: what a crash and restart look like.
    pub fn crash_and_restart(&mut self) -> Result<(), RedisServerError> {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.child = spawn(self.port, self.aof_dir.as_deref(), &self.extra)?;
        self.wait_ready()
    }

    /// A local port nothing listens on at the moment of asking.
    pub fn free_port() -> Result<u16, RedisServerError> {
        free_port().map_err(RedisServerError::Spawn)
    }

    /// A [`RedisStore`] on this server in `namespace`; it connects on first use.
    pub fn store(&self, namespace: &str) -> Result<RedisStore, RedisServerError> {
        let namespace: Namespace = namespace
            .parse()
            .map_err(|e: NamespaceParseError| RedisServerError::Store(e.to_string()))?;
        let client =
            redis::Client::open(self.url()).map_err(|e| RedisServerError::Store(e.to_string()))?;
        Ok(RedisStore::new(client, namespace))
    }

    /// A connection to this server made on first use, for the stores next to the main one
    /// (signals, controls).
    pub fn link(&self) -> Result<std::sync::Arc<crate::redis_link::RedisLink>, RedisServerError> {
        let client =
            redis::Client::open(self.url()).map_err(|e| RedisServerError::Store(e.to_string()))?;
        Ok(std::sync::Arc::new(crate::redis_link::RedisLink::new(
            client,
            RedisStore::connection_defaults(),
        )))
    }

    /// A connection to this server that reconnects by itself, for tests that drive Redis
    /// directly (the governor's ledgers).
    pub async fn connection_manager(
        &self,
    ) -> Result<redis::aio::ConnectionManager, RedisServerError> {
        let client =
            redis::Client::open(self.url()).map_err(|e| RedisServerError::Store(e.to_string()))?;
        redis::aio::ConnectionManager::new(client)
            .await
            .map_err(|e| RedisServerError::Connect(e.to_string()))
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// `redis://127.0.0.1:PORT/`
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    fn wait_ready(&mut self) -> Result<(), RedisServerError> {
        let started = Instant::now();
        while started.elapsed() < READY_TIMEOUT {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            if answers_ping(self.port) {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Err(RedisServerError::NotReady {
            port: self.port,
            waited: started.elapsed(),
        })
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        // Already exited is fine; there is nothing else to do about a failed kill.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> io::Result<u16> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
    Ok(listener.local_addr()?.port())
}

fn spawn(port: u16, aof_dir: Option<&Path>, extra: &[String]) -> Result<Child, RedisServerError> {
    let port_arg = port.to_string();
    let persistence: Vec<String> = match aof_dir {
        None => ["--save", "", "--appendonly", "no"]
            .map(String::from)
            .to_vec(),
        Some(dir) => vec![
            "--save".into(),
            String::new(),
            "--appendonly".into(),
            "yes".into(),
            "--appendfsync".into(),
            "everysec".into(),
            "--dir".into(),
            dir.to_string_lossy().into_owned(),
        ],
    };
    for binary in std::iter::once("redis-server").chain(FALLBACK_BINARIES) {
        let spawned = Command::new(binary)
            .args(["--port", &port_arg, "--bind", "127.0.0.1"])
            .args(&persistence)
            .args(extra)
            .args(["--loglevel", "warning"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
        match spawned {
            Ok(child) => return Ok(child),
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(RedisServerError::Spawn(e)),
        }
    }
    Err(RedisServerError::NotInstalled)
}

fn answers_ping(port: u16) -> bool {
    let Ok(mut stream) = TcpStream::connect((Ipv4Addr::LOCALHOST, port)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_millis(200)));
    if stream.write_all(b"PING\r\n").is_err() {
        return false;
    }
    let mut reply = [0u8; 7];
    stream.read_exact(&mut reply).is_ok() && &reply == b"+PONG\r\n"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn started_server_answers_ping_and_stops_on_drop() {
        let server =
            RedisServer::start().expect("redis-server must be installed for the store tests");
        let port = server.port();
        assert!(answers_ping(port));
        drop(server);
        assert!(!answers_ping(port));
    }

    fn send(port: u16, command: &str, reply_len: usize) -> Vec<u8> {
        let mut stream = TcpStream::connect((Ipv4Addr::LOCALHOST, port)).unwrap();
        stream.write_all(command.as_bytes()).unwrap();
        let mut reply = vec![0u8; reply_len];
        stream.read_exact(&mut reply).unwrap();
        reply
    }

    #[test]
    fn aof_server_keeps_writes_across_a_crash_and_restart_and_plain_one_does_not() {
        let dir = std::env::temp_dir().join(format!("stormgate-aof-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut durable = RedisServer::start_with_aof(&dir).unwrap();
        // WAIT-free durability check: appendfsync everysec flushes within a second.
        assert_eq!(send(durable.port(), "SET k v\r\n", 5), b"+OK\r\n");
        std::thread::sleep(Duration::from_millis(1_500));
        durable.crash_and_restart().unwrap();
        assert_eq!(send(durable.port(), "GET k\r\n", 7), b"$1\r\nv\r\n");
        drop(durable);
        let _ = std::fs::remove_dir_all(&dir);

        let mut volatile = RedisServer::start().unwrap();
        assert_eq!(send(volatile.port(), "SET k v\r\n", 5), b"+OK\r\n");
        volatile.crash_and_restart().unwrap();
        assert_eq!(send(volatile.port(), "GET k\r\n", 5), b"$-1\r\n");
    }
}
