//! jsonwebtoken's signature checks on ring, the cryptography the TLS stack
//! already links (jsonwebtoken's own back-ends are aws-lc or RustCrypto's
//! RSA and NIST curves, each a second copy in the Lambda bootstraps).
//!
//! Only the asymmetric algorithms identity providers sign with are accepted.
//! HMAC is refused: a JWKS is public, so a token "signed" with a key from it
//! proves nothing. This provider verifies and never signs.

use jsonwebtoken::crypto::{CryptoProvider, JwtSigner, JwtVerifier, KeyUtils};
use jsonwebtoken::errors::{Error, ErrorKind};
use jsonwebtoken::{Algorithm, AlgorithmFamily, DecodingKey, DecodingKeyKind, EncodingKey, signature};
use ring::signature::{self as ring_sig, UnparsedPublicKey};

pub(crate) static RING: CryptoProvider = CryptoProvider {
    signer_factory: refuse_signing,
    verifier_factory: verifier,
    key_utils: KeyUtils::new_unimplemented(),
};

/// Make [`RING`] the process's provider (kept if one is already installed).
pub(crate) fn install() {
    let _ = RING.install_default();
}

fn refuse_signing(_: &Algorithm, _: &EncodingKey) -> Result<Box<dyn JwtSigner>, Error> {
    Err(ErrorKind::InvalidAlgorithm.into())
}

#[derive(Clone, Copy)]
enum Check {
    /// RSA keys from a JWKS come as modulus and exponent, which only
    /// `RsaParameters` can check.
    Rsa(&'static ring_sig::RsaParameters),
    Point(&'static dyn ring_sig::VerificationAlgorithm),
}

fn verifier(algorithm: &Algorithm, key: &DecodingKey) -> Result<Box<dyn JwtVerifier>, Error> {
    use Algorithm::*;
    let (family, check) = match algorithm {
        RS256 => (AlgorithmFamily::Rsa, Check::Rsa(&ring_sig::RSA_PKCS1_2048_8192_SHA256)),
        RS384 => (AlgorithmFamily::Rsa, Check::Rsa(&ring_sig::RSA_PKCS1_2048_8192_SHA384)),
        RS512 => (AlgorithmFamily::Rsa, Check::Rsa(&ring_sig::RSA_PKCS1_2048_8192_SHA512)),
        PS256 => (AlgorithmFamily::Rsa, Check::Rsa(&ring_sig::RSA_PSS_2048_8192_SHA256)),
        PS384 => (AlgorithmFamily::Rsa, Check::Rsa(&ring_sig::RSA_PSS_2048_8192_SHA384)),
        PS512 => (AlgorithmFamily::Rsa, Check::Rsa(&ring_sig::RSA_PSS_2048_8192_SHA512)),
        ES256 => (AlgorithmFamily::Ec, Check::Point(&ring_sig::ECDSA_P256_SHA256_FIXED)),
        ES384 => (AlgorithmFamily::Ec, Check::Point(&ring_sig::ECDSA_P384_SHA384_FIXED)),
        EdDSA => (AlgorithmFamily::Ed, Check::Point(&ring_sig::ED25519)),
        // HMAC, and whatever later versions add.
        _ => return Err(ErrorKind::InvalidAlgorithm.into()),
    };
    if key.family() != family {
        return Err(ErrorKind::InvalidKeyFormat.into());
    }
    Ok(Box::new(RingVerifier { algorithm: *algorithm, check, key: key.clone() }))
}

struct RingVerifier {
    algorithm: Algorithm,
    check: Check,
    key: DecodingKey,
}

impl signature::Verifier<Vec<u8>> for RingVerifier {
    fn verify(&self, message: &[u8], signature: &Vec<u8>) -> Result<(), signature::Error> {
        let checked = match (self.check, self.key.kind()) {
            (Check::Rsa(parameters), DecodingKeyKind::RsaModulusExponent { n, e }) => {
                ring_sig::RsaPublicKeyComponents { n, e }.verify(parameters, message, signature)
            }
            (Check::Rsa(parameters), DecodingKeyKind::SecretOrDer(der)) => {
                UnparsedPublicKey::new(parameters, der).verify(message, signature)
            }
            (Check::Point(algorithm), DecodingKeyKind::SecretOrDer(point)) => {
                UnparsedPublicKey::new(algorithm, point).verify(message, signature)
            }
            (Check::Point(_), DecodingKeyKind::RsaModulusExponent { .. }) => return Err(signature::Error::new()),
        };
        checked.map_err(|_| signature::Error::new())
    }
}

impl JwtVerifier for RingVerifier {
    fn algorithm(&self) -> Algorithm {
        self.algorithm
    }
}
