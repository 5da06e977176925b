//! A TLS terminator in front of a server, as a deployment's load balancer
//! would be: clients speak TLS to it, it forwards plain bytes to the
//! server. Its certificate is for `localhost`, issued by a test certificate
//! authority (`tests/fixtures/tls/`: `ca.der`, and the server's `leaf.der`
//! and PKCS #8 `leaf.key.der`, valid until 2126) that no system trusts.

use std::net::SocketAddr;
use std::sync::Arc;

use base64::Engine as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;

const CA: &[u8] = include_bytes!("../fixtures/tls/ca.der");
const LEAF: &[u8] = include_bytes!("../fixtures/tls/leaf.der");
const LEAF_KEY: &[u8] = include_bytes!("../fixtures/tls/leaf.key.der");

/// The test certificate authority (DER), for a client to trust.
pub fn test_ca_der() -> Vec<u8> {
    CA.to_vec()
}

/// The test certificate authority as a PEM file's text (as `SSL_CERT_FILE`
/// names one).
pub fn test_ca_pem() -> String {
    let base64 = base64::engine::general_purpose::STANDARD.encode(CA);
    let mut pem = String::from("-----BEGIN CERTIFICATE-----\n");
    for line in base64.as_bytes().chunks(64) {
        pem.push_str(std::str::from_utf8(line).expect("base64 is ASCII"));
        pem.push('\n');
    }
    pem.push_str("-----END CERTIFICATE-----\n");
    pem
}

/// A running TLS terminator.
pub struct TlsTerminator {
    addr: SocketAddr,
    accept: JoinHandle<()>,
}

impl TlsTerminator {
    /// Terminates TLS on a fresh port of 127.0.0.1 and forwards to `target`.
    pub async fn start(target: SocketAddr) -> TlsTerminator {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(LEAF_KEY.to_vec()));
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("TLS versions")
            .with_no_client_auth()
            .with_single_cert(vec![CertificateDer::from(LEAF.to_vec())], key)
            .expect("the test certificate and key");
        let acceptor = TlsAcceptor::from(Arc::new(config));
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("address");
        let accept = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    // A client that refuses the certificate ends here.
                    let Ok(mut client) = acceptor.accept(client).await else {
                        return;
                    };
                    let Ok(mut server) = TcpStream::connect(target).await else {
                        return;
                    };
                    let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                });
            }
        });
        TlsTerminator { addr, accept }
    }

    /// `https://localhost:PORT`: the name the certificate is for.
    pub fn url(&self) -> String {
        format!("https://localhost:{}", self.addr.port())
    }
}

impl Drop for TlsTerminator {
    fn drop(&mut self) {
        self.accept.abort();
    }
}
