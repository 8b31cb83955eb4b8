//! A throwaway `redis-server` for tests and benches: started on a free local port
//! with persistence off, ready once it answers PING, killed when dropped.
//!
//! Tests never skip for want of Redis: when `redis-server` is not installed,
//! [`RedisServer::start`] fails with a message saying so, and the test fails with it.

use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
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
}

/// A running `redis-server` owned by the test; dropping it kills the process.
#[derive(Debug)]
pub struct RedisServer {
    child: Child,
    port: u16,
}

impl RedisServer {
    /// Starts a server on a free port and waits until it answers PING.
    pub fn start() -> Result<Self, RedisServerError> {
        let mut last_error = None;
        for _ in 0..PORT_ATTEMPTS {
            let port = Self::free_port()?;
            let mut server = RedisServer {
                child: spawn(port)?,
                port,
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
            child: spawn(port)?,
            port,
        };
        server.wait_ready()?;
        Ok(server)
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

fn spawn(port: u16) -> Result<Child, RedisServerError> {
    let port_arg = port.to_string();
    for binary in std::iter::once("redis-server").chain(FALLBACK_BINARIES) {
        let spawned = Command::new(binary)
            .args([
                "--port",
                &port_arg,
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ])
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
}
