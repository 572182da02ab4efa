//! The `mqtt` sink's TLS files checked when the sink is made: rumqttc reads them only when it
//! connects, so a bad file would be found at the end of the run ("delivered none").

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
        Ok(certs) if !certs.is_empty() => Ok(pem),
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
        Ok(Some(_)) => Ok(pem),
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
