//! `rediss://` URLs speak TLS (Azure Managed Redis accepts nothing else) and verify the
//! server's certificate: against a real `redis-server` listening with TLS only.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use stormgate_handlers::config::{RedisAuth, RedisSettings};
use stormgate_handlers::lazy_store::LazyStore;
use stormgate_handlers::redis_connector::RedisConnector;
use stormgate_handlers::secrets::Secret;
use stormgate_shared::job::Tier;
use stormgate_shared::testing::redis_server::RedisServer;

/// A redis-server with a TLS port only, its certificate signed by a throwaway CA.
struct TlsRedis {
    child: Child,
    port: u16,
    ca_pem: Vec<u8>,
    _dir: tempfile::TempDir,
}

impl Drop for TlsRedis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn openssl(dir: &Path, args: &[&str]) {
    let status = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("openssl must be installed to make the test certificates");
    assert!(status.success(), "openssl {args:?} failed");
}

fn start_tls_redis() -> TlsRedis {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    openssl(
        d,
        &[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "ca.key",
            "-out",
            "ca.pem",
            "-days",
            "1",
            "-subj",
            "/CN=stormgate test CA",
        ],
    );
    openssl(
        d,
        &[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "server.key",
            "-out",
            "server.csr",
            "-subj",
            "/CN=localhost",
        ],
    );
    std::fs::write(
        d.join("san.ext"),
        "subjectAltName=DNS:localhost,IP:127.0.0.1\n",
    )
    .unwrap();
    openssl(
        d,
        &[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "server.pem",
            "-days",
            "1",
            "-extfile",
            "san.ext",
        ],
    );
    let port = RedisServer::free_port().unwrap();
    let child = Command::new("redis-server")
        .args([
            "--port",
            "0",
            "--tls-port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
        ])
        .args([
            "--tls-cert-file",
            "server.pem",
            "--tls-key-file",
            "server.key",
        ])
        .args(["--tls-ca-cert-file", "ca.pem", "--tls-auth-clients", "no"])
        .args(["--save", "", "--appendonly", "no"])
        .current_dir(d)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("redis-server");
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            Instant::now() < deadline,
            "redis-server did not open its TLS port"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    TlsRedis {
        child,
        port,
        ca_pem: std::fs::read(d.join("ca.pem")).unwrap(),
        _dir: dir,
    }
}

#[tokio::test]
async fn rediss_urls_connect_over_tls_to_a_server_the_client_trusts() {
    let server = start_tls_redis();
    let url = format!("rediss://localhost:{}", server.port);
    let client = redis::Client::build_with_tls(
        url.as_str(),
        redis::TlsCertificates {
            client_tls: None,
            root_cert: Some(server.ca_pem.clone()),
        },
    )
    .unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let pong: String = redis::cmd("PING").query_async(&mut conn).await.unwrap();
    assert_eq!(pong, "PONG");
}

#[tokio::test]
async fn the_handler_refuses_a_tls_server_whose_certificate_it_cannot_verify() {
    let server = start_tls_redis();
    let connector = RedisConnector::with_namespace(
        RedisSettings {
            url: Secret::new(format!("rediss://localhost:{}", server.port)),
            auth: RedisAuth::Url,
        },
        "tls-test",
    );
    let store = LazyStore::new(Arc::new(connector));
    let error = match store.get().await {
        Ok(store) => store.queue_stats(Tier::Premium).await.unwrap_err(),
        Err(e) => e,
    }
    .to_string();
    // It got as far as the handshake (TLS is built in) and refused the unknown issuer.
    assert!(
        !error.contains("feature"),
        "TLS support is missing: {error}"
    );
    assert!(
        error.to_ascii_lowercase().contains("certificate")
            || error.to_ascii_lowercase().contains("unknownissuer"),
        "expected a certificate verification failure, got: {error}"
    );
}
