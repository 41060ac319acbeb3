//! A local rustls server with certificates made for the test (by Python's
//! `cryptography`, which the test command installs with moto), and the
//! process's trusted roots pointed at files.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::process::Command;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// A new certificate authority (PEM) and, signed by it, a certificate for
/// `localhost` with its key (PEM).
pub fn certificates() -> (String, String, String) {
    let script = r#"
import datetime
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
now = datetime.datetime.now(datetime.timezone.utc)
def cert(subject, key, issuer, issuer_key, ca):
    builder = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer).public_key(key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if not ca:
        builder = builder.add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
    return builder.sign(issuer_key, hashes.SHA256()).public_bytes(serialization.Encoding.PEM).decode()
ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "test CA")])
name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
print(cert(ca_name, ca_key, ca_name, ca_key, True) + "\x00" + cert(name, key, ca_name, ca_key, False) + "\x00"
    + key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()).decode())
"#;
    let out = Command::new("python3").args(["-c", script]).output().expect("python3 with cryptography");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    let parts: Vec<&str> = text.split('\0').collect();
    (parts[0].to_owned(), parts[1].to_owned(), parts[2].to_owned())
}

/// Serve one HTTPS request on a loopback port with `cert`, answering `ok`.
pub fn serve_once(cert: &str, key: &str) -> u16 {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![CertificateDer::from_pem_slice(cert.as_bytes()).unwrap()],
            PrivateKeyDer::from_pem_slice(key.as_bytes()).unwrap(),
        )
        .unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let (socket, _) = listener.accept().unwrap();
        let connection = rustls::ServerConnection::new(Arc::new(config)).unwrap();
        let mut tls = rustls::StreamOwned::new(connection, socket);
        let mut request = Vec::new();
        let mut buffer = [0u8; 1024];
        while !request.ends_with(b"\r\n\r\n") {
            // A client that refuses the certificate ends the handshake here.
            match tls.read(&mut buffer) {
                Ok(n) if n > 0 => request.extend_from_slice(&buffer[..n]),
                _ => return,
            }
        }
        tls.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok").unwrap();
        tls.conn.send_close_notify();
        let _ = tls.flush();
    });
    port
}

/// Point the platform's roots (as rustls-platform-verifier reads them) at
/// `file` alone, or at nothing. Call it first in a test binary's only test,
/// before any thread that could read the environment starts.
pub fn trust_only(file: Option<&str>, dir: &std::path::Path) {
    // SAFETY: the only test of its binary calls this first, with no other thread running.
    unsafe {
        std::env::set_var("SSL_CERT_FILE", file.unwrap_or("/nonexistent/ca.pem"));
        std::env::set_var("SSL_CERT_DIR", dir);
    }
}
