//! Outbound HTTP: every reqwest client the product builds (OpenAPI and MCP
//! sources, the AWS SDK, OIDC keys, OTLP export) starts from [`builder`].
//!
//! TLS is rustls with ring as its cryptography. reqwest is built without a
//! provider of its own (its default is aws-lc, which would add about 0.4 MB
//! zipped to every Lambda bootstrap). ring covers TLS 1.2 and 1.3 with the
//! usual suites; it has no post-quantum key exchange.
//!
//! Servers are checked against the platform's trusted roots (on Linux the
//! system's CA bundle, or what `SSL_CERT_FILE` and `SSL_CERT_DIR` name), as
//! reqwest checks them, but the roots are read once per process, at its first
//! TLS handshake. reqwest reads and parses them for every client it builds:
//! several milliseconds each, paid twice by every Lambda cold start before
//! its first answer, for calls it may not make.

use std::sync::{Arc, LazyLock, OnceLock};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, SignatureScheme};

/// A reqwest client builder on the process's TLS configuration.
pub fn builder() -> reqwest::ClientBuilder {
    static TLS: LazyLock<ClientConfig> = LazyLock::new(tls);
    reqwest::Client::builder().tls_backend_preconfigured(TLS.clone())
}

/// What reqwest would configure (TLS 1.2 and 1.3, SNI, HTTP/1.1 by ALPN: it
/// is built without HTTP/2), with ring and the roots read on first use.
fn tls() -> ClientConfig {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .expect("ring supports TLS 1.2 and 1.3")
        .dangerous() // rustls's name for any verifier of one's own; this one checks as reqwest's does.
        .with_custom_certificate_verifier(Arc::new(PlatformRoots { provider, loaded: OnceLock::new() }))
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    config
}

/// reqwest's verifier (rustls-platform-verifier's), made when a server's
/// certificate is first checked.
#[derive(Debug)]
struct PlatformRoots {
    provider: Arc<CryptoProvider>,
    loaded: OnceLock<Result<rustls_platform_verifier::Verifier, rustls::Error>>,
}

impl PlatformRoots {
    fn verifier(&self) -> Result<&rustls_platform_verifier::Verifier, rustls::Error> {
        let loaded = self.loaded.get_or_init(|| {
            rustls_platform_verifier::Verifier::new(self.provider.clone()).map_err(|error| {
                rustls::Error::General(format!(
                    "no trusted root certificates could be read ({error}): install the system's CA certificates \
                     (ca-certificates), or set SSL_CERT_FILE to a PEM bundle of them"
                ))
            })
        });
        loaded.as_ref().map_err(Clone::clone)
    }
}

impl ServerCertVerifier for PlatformRoots {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        self.verifier()?.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.verifier()?.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.verifier()?.verify_tls13_signature(message, cert, dss)
    }

    /// Asked for the client's first message, before any certificate: the
    /// provider's schemes, which are what the platform verifier answers too.
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use rustls::client::danger::ServerCertVerifier;

    #[test]
    fn the_lazy_verifier_offers_what_the_platform_verifier_offers() {
        let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
        let platform = rustls_platform_verifier::Verifier::new(provider.clone()).unwrap();
        let lazy = super::PlatformRoots { provider, loaded: std::sync::OnceLock::new() };
        assert_eq!(lazy.supported_verify_schemes(), platform.supported_verify_schemes());
        assert!(lazy.loaded.get().is_none(), "the roots are read by the first check, not before");
    }
}
