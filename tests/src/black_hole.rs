//! An endpoint that accepts TCP connections and never answers: a peer that hangs. A
//! client's call to it stays in flight until the client's own timeout, which is what a
//! test needs to kill a process in the middle of a call.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::net::SocketAddr;

use tokio::net::TcpListener;
use tokio::task::JoinHandle;

/// A running black hole; closes its connections when dropped.
pub struct BlackHole {
    addr: SocketAddr,
    task: JoinHandle<()>,
}

impl Drop for BlackHole {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl BlackHole {
    pub async fn start() -> BlackHole {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((socket, _)) = listener.accept().await {
                held.push(socket);
            }
        });
        BlackHole { addr, task }
    }

    /// `https://127.0.0.1:<port>/`: an endpoint whose every call hangs.
    pub fn https_url(&self) -> String {
        format!("https://{}/", self.addr)
    }
}
