//! Outbound HTTP: every reqwest client the product builds (OpenAPI and MCP
//! sources, the AWS SDK, OIDC keys, OTLP export) starts from [`builder`].
//!
//! TLS is rustls with ring as its cryptography. reqwest is built without a
//! provider of its own (its default is aws-lc, which would add about 0.4 MB
//! zipped to every Lambda bootstrap), so [`builder`] installs ring as the
//! process's provider before the first client is built. ring covers TLS 1.2
//! and 1.3 with the usual suites; it has no post-quantum key exchange.

use std::sync::Once;

/// A reqwest client builder, with ring installed as the rustls provider.
pub fn builder() -> reqwest::ClientBuilder {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        // Fails only if another provider was installed first; that one is used.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
    reqwest::Client::builder()
}

#[cfg(test)]
mod tests {
    #[test]
    fn clients_build_with_ring_installed() {
        let client = super::builder().build();
        assert!(client.is_ok(), "{client:?}");
        assert!(rustls::crypto::CryptoProvider::get_default().is_some());
    }
}
