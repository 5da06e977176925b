//! Asymmetric JWTs for the JWKS driver, computed independently of the
//! server: signing keys generated at run time (RSA, P-256, Ed25519), their
//! public JWKs, and a local HTTP server publishing a JWKS that a test can
//! change while the server under test runs.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use base64::Engine as _;
use rsa::signature::SignatureEncoding as _;
use rsa::traits::PublicKeyParts as _;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpListener;

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

fn random32() -> [u8; 32] {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).expect("the OS has randomness");
    bytes
}

/// A signing key of one of the asymmetric algorithms, with its `kid`.
pub enum SigningKey {
    /// RS256, a 2048-bit RSA key.
    Rs256(String, Box<rsa::pkcs1v15::SigningKey<rsa::sha2::Sha256>>),
    /// ES256, a P-256 key.
    Es256(String, p256::ecdsa::SigningKey),
    /// EdDSA, an Ed25519 key.
    EdDsa(String, ed25519_dalek::SigningKey),
}

impl SigningKey {
    /// A new RS256 key named `kid`.
    pub fn rs256(kid: &str) -> SigningKey {
        let key = <rsa::PrivateKey as rsa::Generate>::generate();
        SigningKey::Rs256(kid.into(), Box::new(rsa::pkcs1v15::SigningKey::new(key)))
    }

    /// A new ES256 key named `kid`.
    pub fn es256(kid: &str) -> SigningKey {
        loop {
            if let Ok(key) = p256::ecdsa::SigningKey::from_slice(&random32()) {
                return SigningKey::Es256(kid.into(), key);
            }
        }
    }

    /// A new EdDSA key named `kid`.
    pub fn ed_dsa(kid: &str) -> SigningKey {
        SigningKey::EdDsa(
            kid.into(),
            ed25519_dalek::SigningKey::from_bytes(&random32()),
        )
    }

    /// Its `kid`.
    pub fn kid(&self) -> &str {
        match self {
            SigningKey::Rs256(kid, _) | SigningKey::Es256(kid, _) | SigningKey::EdDsa(kid, _) => {
                kid
            }
        }
    }

    /// Its JWS `alg`.
    pub fn alg(&self) -> &'static str {
        match self {
            SigningKey::Rs256(..) => "RS256",
            SigningKey::Es256(..) => "ES256",
            SigningKey::EdDsa(..) => "EdDSA",
        }
    }

    /// The bytes of its public key that an attacker could misuse as an
    /// HMAC secret (the RSA modulus, the EC point, the Ed25519 key).
    pub fn public_bytes(&self) -> Vec<u8> {
        match self {
            SigningKey::Rs256(_, key) => key
                .as_ref()
                .as_ref()
                .n()
                .to_be_bytes_trimmed_vartime()
                .to_vec(),
            SigningKey::Es256(_, key) => {
                key.verifying_key().to_sec1_point(false).as_bytes().to_vec()
            }
            SigningKey::EdDsa(_, key) => key.verifying_key().as_bytes().to_vec(),
        }
    }

    /// Its public key as a JWK.
    pub fn jwk(&self) -> Value {
        match self {
            SigningKey::Rs256(kid, key) => {
                let public = key.as_ref().as_ref().to_public_key();
                json!({"kty": "RSA", "kid": kid, "use": "sig", "alg": "RS256",
                       "n": b64(&public.n().to_be_bytes_trimmed_vartime()),
                       "e": b64(&public.e().to_be_bytes_trimmed_vartime())})
            }
            SigningKey::Es256(kid, key) => {
                let point = key.verifying_key().to_sec1_point(false);
                let bytes = point.as_bytes();
                json!({"kty": "EC", "kid": kid, "use": "sig", "alg": "ES256", "crv": "P-256",
                       "x": b64(&bytes[1..33]), "y": b64(&bytes[33..])})
            }
            SigningKey::EdDsa(kid, key) => json!({"kty": "OKP", "kid": kid, "use": "sig",
                "alg": "EdDSA", "crv": "Ed25519", "x": b64(key.verifying_key().as_bytes())}),
        }
    }

    fn sign(&self, message: &[u8]) -> Vec<u8> {
        use rsa::signature::Signer as _;
        match self {
            SigningKey::Rs256(_, key) => key.sign(message).to_vec(),
            SigningKey::Es256(_, key) => {
                let sig: p256::ecdsa::Signature = key.sign(message);
                sig.to_bytes().to_vec()
            }
            SigningKey::EdDsa(_, key) => key.sign(message).to_bytes().to_vec(),
        }
    }

    /// A JWT of `claims` with its own `alg` and `kid`.
    pub fn token(&self, claims: &Value) -> String {
        self.token_with_header(
            &json!({"alg": self.alg(), "kid": self.kid(), "typ": "JWT"}),
            claims,
        )
    }

    /// A JWT with this exact `header` (whatever it names), signed by this key.
    pub fn token_with_header(&self, header: &Value, claims: &Value) -> String {
        let input = format!(
            "{}.{}",
            b64(header.to_string().as_bytes()),
            b64(claims.to_string().as_bytes())
        );
        format!("{input}.{}", b64(&self.sign(input.as_bytes())))
    }
}

/// A JWKS document of `keys`' public keys.
pub fn jwks_document(keys: &[&SigningKey]) -> String {
    let keys: Vec<Value> = keys.iter().map(|k| k.jwk()).collect();
    json!({ "keys": keys }).to_string()
}

/// A local HTTP server answering every GET with the current JWKS document
/// and counting the requests. It runs until the test's runtime ends.
pub struct JwksServer {
    addr: SocketAddr,
    url: String,
    document: Arc<Mutex<String>>,
    fetches: Arc<AtomicUsize>,
}

impl JwksServer {
    /// Serves `document` on a free port of 127.0.0.1.
    pub async fn start(document: String) -> JwksServer {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let url = format!("http://{addr}/.well-known/jwks.json");
        let document = Arc::new(Mutex::new(document));
        let fetches = Arc::new(AtomicUsize::new(0));
        let (doc, count) = (document.clone(), fetches.clone());
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let (doc, count) = (doc.clone(), count.clone());
                tokio::spawn(async move {
                    let mut request = Vec::new();
                    let mut buf = [0u8; 1024];
                    while !request.windows(4).any(|w| w == b"\r\n\r\n") && request.len() < 16 * 1024
                    {
                        match stream.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => request.extend_from_slice(&buf[..n]),
                        }
                    }
                    count.fetch_add(1, Ordering::SeqCst);
                    let body = doc.lock().expect("document lock").clone();
                    let response = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = stream.write_all(response.as_bytes()).await;
                    let _ = stream.shutdown().await;
                });
            }
        });
        JwksServer {
            addr,
            url,
            document,
            fetches,
        }
    }

    /// The document's URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The address it listens on (for a TLS terminator in front of it).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Publishes `document` from now on.
    pub fn publish(&self, document: String) {
        *self.document.lock().expect("document lock") = document;
    }

    /// How many times the document was fetched.
    pub fn fetches(&self) -> usize {
        self.fetches.load(Ordering::SeqCst)
    }
}
