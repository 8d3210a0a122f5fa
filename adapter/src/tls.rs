//! HTTPS without a proxy: `serve --tls-cert/--tls-key`. The certificate
//! chain and key are PEM files (what certbot, step-ca or openssl write);
//! engram-mcp reads them again when either file changes, so a renewed
//! certificate is served from the next connection on without a restart,
//! and a renewal that leaves an unreadable or mismatched pair keeps the
//! last good one (with a warning) rather than failing every handshake.

use anyhow::{bail, Context};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;
use tokio_rustls::rustls::crypto::{ring, CryptoProvider};
use tokio_rustls::rustls::server::{ClientHello, ResolvesServerCert};
use tokio_rustls::rustls::sign::CertifiedKey;
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::TlsAcceptor;

/// The acceptor `serve` wraps each connection in. Fails at start-up, naming
/// the file, when the pair cannot be served.
pub fn acceptor(cert: &Path, key: &Path) -> anyhow::Result<TlsAcceptor> {
    let provider = Arc::new(ring::default_provider());
    let pair = Pair {
        cert: cert.to_path_buf(),
        key: key.to_path_buf(),
    };
    let loaded = pair.load(&provider)?;
    let resolver = Reloading {
        pair,
        provider: provider.clone(),
        current: Mutex::new(loaded),
    };
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .context("TLS: no protocol version in common with the crypto provider")?
        .with_no_client_auth()
        .with_cert_resolver(Arc::new(resolver));
    // The server speaks HTTP/1.1 only; saying so lets clients skip h2.
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

#[derive(Debug)]
struct Pair {
    cert: PathBuf,
    key: PathBuf,
}

/// A certificate chain and key as served, with the files' modification
/// times they were read at.
#[derive(Debug)]
struct Loaded {
    stamp: (Option<SystemTime>, Option<SystemTime>),
    key: Arc<CertifiedKey>,
}

fn modified(path: &Path) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

impl Pair {
    fn stamp(&self) -> (Option<SystemTime>, Option<SystemTime>) {
        (modified(&self.cert), modified(&self.key))
    }

    fn load(&self, provider: &CryptoProvider) -> anyhow::Result<Loaded> {
        let stamp = self.stamp();
        let chain = CertificateDer::pem_file_iter(&self.cert)
            .with_context(|| format!("--tls-cert: cannot read {}", self.cert.display()))?
            .collect::<Result<Vec<_>, _>>()
            .with_context(|| format!("--tls-cert: {} is not PEM", self.cert.display()))?;
        if chain.is_empty() {
            bail!(
                "--tls-cert: {} holds no CERTIFICATE block; give the PEM certificate chain, the server's certificate first",
                self.cert.display()
            );
        }
        let key = PrivateKeyDer::from_pem_file(&self.key).with_context(|| {
            format!(
                "--tls-key: {} holds no readable private key (PEM: PRIVATE KEY, RSA PRIVATE KEY or EC PRIVATE KEY)",
                self.key.display()
            )
        })?;
        let key = CertifiedKey::from_der(chain, key, provider).with_context(|| {
            format!(
                "--tls-key: {} does not match the certificate in {} (or its type is not supported)",
                self.key.display(),
                self.cert.display()
            )
        })?;
        Ok(Loaded {
            stamp,
            key: Arc::new(key),
        })
    }
}

/// Serves the pair as last read, reading it again when a file's
/// modification time changes (two stat calls per handshake).
#[derive(Debug)]
struct Reloading {
    pair: Pair,
    provider: Arc<CryptoProvider>,
    current: Mutex<Loaded>,
}

impl ResolvesServerCert for Reloading {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let mut current = self.current.lock().unwrap_or_else(|p| p.into_inner());
        let stamp = self.pair.stamp();
        if stamp != current.stamp {
            match self.pair.load(&self.provider) {
                Ok(loaded) => {
                    tracing::info!(cert = %self.pair.cert.display(), "TLS certificate reloaded");
                    *current = loaded;
                }
                Err(e) => {
                    // Tried again only when the files change again.
                    current.stamp = stamp;
                    tracing::warn!(error = format!("{e:#}"), "TLS: keeping the certificate in use");
                }
            }
        }
        Some(current.key.clone())
    }
}
