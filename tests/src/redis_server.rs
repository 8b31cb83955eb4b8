//! A throwaway `redis-server` for tests and benches: started on a free port, no
//! persistence, killed when dropped. Fails loudly (never skips) when Redis is missing.
//! (The same harness as `shared/tests/support/redis_server.rs`.)
#![allow(clippy::expect_used, clippy::panic)]

use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const REDIS_SERVER: &str = "/usr/bin/redis-server";

pub struct RedisServer {
    child: Child,
    port: u16,
}

impl RedisServer {
    /// Starts a server and waits until it answers PING.
    pub fn start() -> RedisServer {
        let binary = if Path::new(REDIS_SERVER).exists() {
            REDIS_SERVER
        } else {
            "redis-server"
        };
        for _attempt in 0..5 {
            let port = free_port();
            let child = Command::new(binary)
                .args([
                    "--port",
                    &port.to_string(),
                    "--bind",
                    "127.0.0.1",
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                ])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap_or_else(|e| {
                    panic!("cannot start {binary} (install the redis-server package): {e}")
                });
            let mut server = RedisServer { child, port };
            if server.wait_ready(Duration::from_secs(5)) {
                return server;
            }
            // Lost the port race or failed to start: the drop kills it; try another port.
        }
        panic!("redis-server did not become ready on any free port");
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    pub fn client(&self) -> redis::Client {
        redis::Client::open(self.url()).expect("valid redis url")
    }

    /// A fresh connection manager (its own TCP connection).
    pub async fn connection(&self) -> redis::aio::ConnectionManager {
        redis::aio::ConnectionManager::new(self.client())
            .await
            .expect("connect to test redis")
    }

    fn wait_ready(&mut self, timeout: Duration) -> bool {
        let start = Instant::now();
        while start.elapsed() < timeout {
            if let Ok(Some(_exited)) = self.child.try_wait() {
                return false;
            }
            if let Ok(mut conn) = self.client().get_connection()
                && redis::cmd("PING").query::<String>(&mut conn).is_ok()
            {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port");
    listener.local_addr().expect("local addr").port()
}
