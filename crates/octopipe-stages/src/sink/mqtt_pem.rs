//! The `mqtt` sink's TLS files checked when the sink is made: rumqttc reads them only when it
//! connects, so a bad file would be found at the end of the run ("delivered none"). Not only
//! their PEM armour: the certificates are parsed as X.509 and the key as rustls will sign
//! with it.

use std::path::Path;

use octopipe_core::description::DescribeError;
use octopipe_core::stage::Props;

/// `pem`, the contents of `path`, when it holds PEM certificates (checked now: rumqttc would
/// find out only when it connects, and the run would learn it at its end).
pub(super) fn certificates(
    p: &Props,
    key: &str,
    path: &Path,
    pem: Vec<u8>,
) -> Result<Vec<u8>, DescribeError> {
    let parsed: Result<Vec<_>, _> = rustls_pemfile::certs(&mut &pem[..]).collect();
    match parsed {
        Ok(certs) if !certs.is_empty() => {
            // Inside the armour, each an X.509 certificate (PEM around garbage is not one).
            let mut store = rustls::RootCertStore::empty();
            for (i, cert) in certs.into_iter().enumerate() {
                if let Err(e) = store.add(cert) {
                    return Err(p.error(
                        key,
                        format!(
                            "mqtt: {key} '{}': certificate {} is not an X.509 certificate: {e}",
                            path.display(),
                            i + 1
                        ),
                    ));
                }
            }
            Ok(pem)
        }
        Ok(_) => Err(p.error(
            key,
            format!(
                "mqtt: {key} '{}': no PEM certificate in it (-----BEGIN CERTIFICATE-----)",
                path.display()
            ),
        )),
        Err(e) => Err(p.error(
            key,
            format!("mqtt: {key} '{}': not PEM: {e}", path.display()),
        )),
    }
}

/// `pem`, the contents of `path`, when it holds a private key (PKCS#1, PKCS#8 or SEC1 PEM).
pub(super) fn private_key(p: &Props, path: &Path, pem: Vec<u8>) -> Result<Vec<u8>, DescribeError> {
    match rustls_pemfile::private_key(&mut &pem[..]) {
        // Inside the armour, a key rustls signs with (RSA, ECDSA, Ed25519), as the handshake
        // will need it: PEM around garbage is refused now, not when the broker is reached.
        Ok(Some(key)) => match rustls::crypto::ring::sign::any_supported_type(&key) {
            Ok(_) => Ok(pem),
            Err(e) => Err(p.error(
                "key-file",
                format!(
                    "mqtt: key-file '{}': not a private key TLS can use (RSA, ECDSA or Ed25519): {e}",
                    path.display()
                ),
            )),
        },
        Ok(None) => Err(p.error(
            "key-file",
            format!(
                "mqtt: key-file '{}': no PEM private key in it (PKCS#1, PKCS#8 or SEC1)",
                path.display()
            ),
        )),
        Err(e) => Err(p.error(
            "key-file",
            format!("mqtt: key-file '{}': not PEM: {e}", path.display()),
        )),
    }
}
