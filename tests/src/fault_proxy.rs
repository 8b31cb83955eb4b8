//! A TCP proxy between the handler and `redis-server` that can take the network away:
//! refuse new connections and drop open ones (Redis unreachable), or pass exactly the
//! next N bytes from the handler and then cut every connection, so a pipeline reaches
//! Redis only in part (the link dies mid-write). Redis itself keeps running: what the
//! tests see afterwards is exactly what reached it.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Link {
    Up,
    Down,
    /// Up until this many more bytes went from the handler to Redis, then down.
    CutAfter(usize),
}

#[derive(Debug)]
struct Shared {
    link: Link,
    connections: Vec<JoinHandle<()>>,
    /// Bytes passed from the handler to Redis so far.
    forwarded: usize,
}

impl Shared {
    fn drop_connections(&mut self) {
        for connection in self.connections.drain(..) {
            connection.abort();
        }
    }
}

/// A running proxy; stops (and drops its connections) when dropped.
pub struct FaultProxy {
    addr: SocketAddr,
    shared: Arc<Mutex<Shared>>,
    task: JoinHandle<()>,
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.task.abort();
        self.shared.lock().unwrap().drop_connections();
    }
}

impl FaultProxy {
    /// Proxies 127.0.0.1:<new port> to 127.0.0.1:`upstream_port`, link up.
    pub async fn start(upstream_port: u16) -> FaultProxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let upstream = SocketAddr::from(([127, 0, 0, 1], upstream_port));
        let shared = Arc::new(Mutex::new(Shared {
            link: Link::Up,
            connections: Vec::new(),
            forwarded: 0,
        }));
        let accepting = shared.clone();
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let mut state = accepting.lock().unwrap();
                if state.link == Link::Down {
                    drop(client);
                    continue;
                }
                let connection = tokio::spawn(relay(client, upstream, accepting.clone()));
                state.connections.push(connection);
            }
        });
        FaultProxy { addr, shared, task }
    }

    /// `redis://127.0.0.1:<port>/`: the URL to give the handler.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.addr.port())
    }

    /// Redis becomes unreachable: open connections drop, new ones are closed at once.
    pub fn down(&self) {
        let mut state = self.shared.lock().unwrap();
        state.link = Link::Down;
        state.drop_connections();
    }

    /// Redis is reachable again.
    pub fn up(&self) {
        self.shared.lock().unwrap().link = Link::Up;
    }

    /// The next `bytes` bytes from the handler reach Redis; then the link goes down.
    pub fn cut_after(&self, bytes: usize) {
        self.shared.lock().unwrap().link = Link::CutAfter(bytes);
    }

    /// Bytes passed from the handler to Redis so far (to size a cut).
    pub fn forwarded(&self) -> usize {
        self.shared.lock().unwrap().forwarded
    }

    /// Whether the link went down (by [`FaultProxy::down`] or a spent cut).
    pub fn is_down(&self) -> bool {
        self.shared.lock().unwrap().link == Link::Down
    }
}

async fn relay(mut client: TcpStream, upstream: SocketAddr, shared: Arc<Mutex<Shared>>) {
    let Ok(mut server) = TcpStream::connect(upstream).await else {
        return;
    };
    let (mut client_read, mut client_write) = client.split();
    let (mut server_read, mut server_write) = server.split();
    let to_server = async {
        let mut buffer = vec![0u8; 16 * 1024];
        loop {
            let n = match client_read.read(&mut buffer).await {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            let allowed = allowance(&shared, n);
            if allowed > 0 && server_write.write_all(&buffer[..allowed]).await.is_err() {
                return;
            }
            if allowed < n {
                // The cut: what was not allowed never reaches Redis.
                let _ = server_write.flush().await;
                return;
            }
        }
    };
    let to_client = async {
        let _ = tokio::io::copy(&mut server_read, &mut client_write).await;
    };
    tokio::select! {
        () = to_server => {},
        () = to_client => {},
    }
}

/// How many of `n` bytes may pass now; spends a cut's budget and takes the link down
/// when it runs out.
fn allowance(shared: &Mutex<Shared>, n: usize) -> usize {
    let mut state = shared.lock().unwrap();
    let allowed = match state.link {
        Link::Up => n,
        Link::Down => 0,
        Link::CutAfter(budget) if n < budget => {
            state.link = Link::CutAfter(budget - n);
            n
        }
        Link::CutAfter(budget) => {
            state.link = Link::Down;
            budget
        }
    };
    state.forwarded += allowed;
    allowed
}
