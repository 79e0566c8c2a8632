//! TLS settings of the Redis stores: the certificates beyond the
//! platform's trust store, the process's rustls provider, and the warning
//! for `#insecure`.

use crate::ConfigError;
use redis::{Client, ClientTlsConfig, ConnectionAddr, TlsCertificates};
use std::sync::Once;

/// Certificates for TLS beyond the platform's trust store: a CA to trust,
/// and a client certificate for servers that ask for one. PEM.
#[derive(Clone, Default)]
pub(super) struct Certificates {
    pub(super) ca: Option<Vec<u8>>,
    pub(super) client: Option<(Vec<u8>, Vec<u8>)>,
}

impl Certificates {
    pub(super) fn is_empty(&self) -> bool {
        self.ca.is_none() && self.client.is_none()
    }

    /// The field to name in an error about these certificates.
    pub(super) fn field(&self) -> &'static str {
        if self.ca.is_some() {
            "ca_certificate"
        } else {
            "client_certificate"
        }
    }

    /// redis-rs's form, each PEM checked: an error names the field.
    pub(super) fn to_redis(&self) -> Result<TlsCertificates, ConfigError> {
        use rustls::pki_types::{pem::PemObject, CertificateDer};
        let certificates = |pem: &[u8]| CertificateDer::pem_slice_iter(pem).flatten().count();
        if self.ca.as_deref().is_some_and(|pem| certificates(pem) == 0) {
            return Err(ConfigError::new(
                "ca_certificate",
                "no PEM certificate in it",
            ));
        }
        if self
            .client
            .as_ref()
            .is_some_and(|(cert, _)| certificates(cert) == 0)
        {
            return Err(ConfigError::new(
                "client_certificate",
                "no PEM certificate in it",
            ));
        }
        let ca = TlsCertificates {
            client_tls: None,
            root_cert: self.ca.clone(),
        };
        check_pem(&ca, "ca_certificate")?;
        let client = TlsCertificates {
            client_tls: self.client.clone().map(|(cert, key)| ClientTlsConfig {
                client_cert: cert,
                client_key: key,
            }),
            root_cert: None,
        };
        check_pem(&client, "client_certificate")?;
        Ok(TlsCertificates {
            client_tls: client.client_tls,
            root_cert: ca.root_cert,
        })
    }
}

/// Parse `certs` as a TLS client would, naming `field` when it cannot.
fn check_pem(certs: &TlsCertificates, field: &'static str) -> Result<(), ConfigError> {
    let probe = Client::build_with_tls("rediss://127.0.0.1:1", certs.clone());
    probe
        .map(drop)
        .map_err(|e| ConfigError::new(field, format!("not usable PEM: {e}")))
}

/// rustls's cryptography for this process: `aws-lc-rs`, unless the app installed
/// a provider of its own first. Called before any TLS connection is
/// configured (redis-rs configures TLS from the process's default provider,
/// and rustls cannot pick one by itself when the app's dependencies enable
/// two).
pub(super) fn tls_provider() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    });
}

/// redis-rs's `#insecure` (no certificate verification): for tests only.
pub(super) fn warn_if_insecure(addr: &ConnectionAddr) {
    if let ConnectionAddr::TcpTls {
        insecure: true,
        host,
        port,
        ..
    } = addr
    {
        warn_insecure(&format!("{host}:{port}"));
    }
}

pub(super) fn warn_insecure(to: &str) {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        tracing::warn!(
            to,
            "floodgate: TLS without certificate verification (#insecure in the Redis URL): \
             anyone on the path can read and change rate-limit state; for tests only"
        );
    });
}
