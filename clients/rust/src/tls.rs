//! TLS for `https://` and `wss://` servers: rustls with the ring provider,
//! trusting the system's root certificates and any the application adds.

use std::sync::Arc;

use rustls::pki_types::CertificateDer;
use rustls::{ClientConfig, RootCertStore};

use crate::Error;

/// The client configuration for a secure server: the system's roots (when
/// `system_roots`), then `extra_roots` (DER).
pub(crate) fn client_config(
    system_roots: bool,
    extra_roots: &[Vec<u8>],
) -> Result<Arc<ClientConfig>, Error> {
    let mut roots = RootCertStore::empty();
    if system_roots {
        // Certificates the system store holds but rustls cannot parse are
        // skipped, as browsers do; a store with none left still lets the
        // extra roots work.
        let native = rustls_native_certs::load_native_certs();
        roots.add_parsable_certificates(native.certs);
    }
    for der in extra_roots {
        roots
            .add(CertificateDer::from(der.clone()))
            .map_err(|e| Error::InvalidUrl(format!("a root certificate rustls cannot use: {e}")))?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::InvalidUrl(format!("TLS: {e}")))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}
