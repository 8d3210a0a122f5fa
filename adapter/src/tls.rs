//! HTTPS without a proxy: `serve --tls-cert/--tls-key`. The certificate
//! chain and key are PEM files (what certbot, step-ca or openssl write);
//! engram-mcp reads them again when either file changes (looked at once a
//! second at most, from the handshakes), so a renewed certificate is served
//! without a restart, and a renewal that leaves an unreadable or mismatched
//! pair keeps the last good one (with a warning, tried again every few
//! seconds) rather than failing every handshake.

use anyhow::{bail, Context};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

/// How often the files are looked at, and how soon a pair that failed to
/// load is tried again although the files look unchanged (a writer caught
/// halfway can leave a stamp that does not change again).
const LOOK_EVERY: Duration = Duration::from_secs(1);
const RETRY_FAILED: Duration = Duration::from_secs(10);
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
        current: Mutex::new(State {
            loaded,
            looked: Instant::now(),
            failed: None,
        }),
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

/// What a file looked like: modification time, length, inode (a file
/// replaced by a rename is a new inode).
type FileStamp = Option<(SystemTime, u64, u64)>;

/// A certificate chain and key as served, with what the files looked like
/// when they were read.
#[derive(Debug)]
struct Loaded {
    stamp: (FileStamp, FileStamp),
    key: Arc<CertifiedKey>,
}

fn file_stamp(path: &Path) -> FileStamp {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).ok()?;
    Some((m.modified().ok()?, m.len(), m.ino()))
}

impl Pair {
    fn stamp(&self) -> (FileStamp, FileStamp) {
        (file_stamp(&self.cert), file_stamp(&self.key))
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

/// Serves the pair as last read, reading it again when a file changes.
#[derive(Debug)]
struct Reloading {
    pair: Pair,
    provider: Arc<CryptoProvider>,
    current: Mutex<State>,
}

#[derive(Debug)]
struct State {
    loaded: Loaded,
    /// When the files were last looked at.
    looked: Instant,
    /// The stamp and time of the last failed load.
    failed: Option<((FileStamp, FileStamp), Instant)>,
}

impl ResolvesServerCert for Reloading {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let mut state = self.current.lock().unwrap_or_else(|p| p.into_inner());
        if state.looked.elapsed() >= LOOK_EVERY {
            state.looked = Instant::now();
            let stamp = self.pair.stamp();
            let retry = match &state.failed {
                Some((failed, at)) => *failed != stamp || at.elapsed() >= RETRY_FAILED,
                None => true,
            };
            if stamp != state.loaded.stamp && retry {
                match self.pair.load(&self.provider) {
                    Ok(loaded) => {
                        tracing::info!(cert = %self.pair.cert.display(), "TLS certificate reloaded");
                        state.loaded = loaded;
                        state.failed = None;
                    }
                    Err(e) => {
                        state.failed = Some((stamp, Instant::now()));
                        tracing::warn!(error = format!("{e:#}"), "TLS: keeping the certificate in use");
                    }
                }
            }
        }
        Some(state.loaded.key.clone())
    }
}
