//! What engram-mcp works with: the engram extension versions whose SQL API
//! its calls match, and where it finds the local model when no flag says.

use std::path::{Path, PathBuf};

/// Extension versions this engram-mcp's calls match, oldest first; the last
/// is this release's. A release whose API changes a call the adapter makes
/// raises the first (sql/README.md, "Writing the next upgrade").
pub const EXTENSION_VERSIONS: [&str; 5] = ["0.20.0", "0.21.0", "0.22.0", "0.23.0", "0.24.0"];

/// `engram-mcp --version` (a test checks it names every supported version).
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (engram extension 0.20.0, 0.21.0, 0.22.0, 0.23.0, 0.24.0)"
);

fn parse(v: &str) -> Option<(u64, u64, u64)> {
    let mut parts = v.trim().split('.').map(|p| p.parse::<u64>().ok());
    let out = (parts.next()??, parts.next()??, parts.next()??);
    parts.next().is_none().then_some(out)
}

/// Whether a database whose engram is `found` (`pg_extension.extversion`;
/// `None` when engram is not installed there) can be served, and if not,
/// what to run.
pub fn check_extension(found: Option<&str>) -> Result<(), String> {
    let supported = EXTENSION_VERSIONS.join(", ");
    let Some(found) = found else {
        return Err(
            "engram is not installed in this database: run CREATE EXTENSION engram CASCADE \
                    (as its owner; scripts/run does it)"
                .to_string(),
        );
    };
    if EXTENSION_VERSIONS.contains(&found) {
        return Ok(());
    }
    let newest = EXTENSION_VERSIONS[EXTENSION_VERSIONS.len() - 1];
    match (parse(found), parse(EXTENSION_VERSIONS[0]), parse(newest)) {
        (Some(v), Some(oldest), _) if v < oldest => Err(format!(
            "the database has engram {found}; engram-mcp {} works with engram {supported}: \
             run ALTER EXTENSION engram UPDATE in it (as its owner, after installing the extension's files)",
            env!("CARGO_PKG_VERSION")
        )),
        (Some(v), _, Some(newest_v)) if v > newest_v => Err(format!(
            "the database has engram {found}, newer than engram-mcp {} knows ({supported}): \
             install the engram-mcp of engram {found}",
            env!("CARGO_PKG_VERSION")
        )),
        _ => Err(format!(
            "the database has engram {found}, which engram-mcp {} does not know ({supported}): \
             install the engram-mcp of that release, or ALTER EXTENSION engram UPDATE",
            env!("CARGO_PKG_VERSION")
        )),
    }
}

/// Where an installed engram-mcp keeps `rel` (a path under the state
/// directory): under `share/engram` beside its binary's directory (the
/// Debian package: `/usr/bin/engram-mcp` finds `/usr/share/engram/<rel>`,
/// before any other ONNX Runtime in `/usr/lib`), else beside the binary's
/// directory (`scripts/run`'s `.engram/bin/engram-mcp` finds
/// `.engram/<rel>`). Never the working directory: ONNX Runtime is a library
/// engram-mcp loads, and a client may start it anywhere. With neither there,
/// the first candidate, which the loader's error then names.
fn installed(exe: Option<&Path>, rel: &str) -> PathBuf {
    let Some(prefix) = exe.and_then(Path::parent).and_then(Path::parent) else {
        return Path::new("/usr/share/engram").join(rel);
    };
    let candidates = [prefix.join("share/engram").join(rel), prefix.join(rel)];
    let found = candidates.iter().find(|p| p.exists());
    found.unwrap_or(&candidates[0]).clone()
}

fn current_exe() -> Option<PathBuf> {
    std::env::current_exe().ok()
}

/// The local model's directory when neither --model-dir nor
/// ENGRAM_MODEL_DIR says.
pub fn default_model_dir() -> PathBuf {
    installed(current_exe().as_deref(), "models/all-MiniLM-L6-v2")
}

/// ONNX Runtime's library when neither --onnx-runtime nor
/// ENGRAM_ONNX_RUNTIME says.
pub fn default_onnx_runtime() -> PathBuf {
    installed(current_exe().as_deref(), "lib/libonnxruntime.so")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_version_line_names_every_supported_version() {
        for v in EXTENSION_VERSIONS {
            assert!(VERSION.contains(v), "{VERSION} lacks {v}");
        }
        assert_eq!(
            EXTENSION_VERSIONS[EXTENSION_VERSIONS.len() - 1],
            env!("CARGO_PKG_VERSION")
        );
        assert!(VERSION.starts_with(env!("CARGO_PKG_VERSION")));
    }

    #[test]
    fn unknown_versions_are_refused_saying_what_to_run() {
        assert!(check_extension(Some(env!("CARGO_PKG_VERSION"))).is_ok());
        assert!(check_extension(Some(EXTENSION_VERSIONS[0])).is_ok());
        let old = check_extension(Some("0.1.0")).unwrap_err();
        assert!(old.contains("ALTER EXTENSION engram UPDATE"), "{old}");
        let new = check_extension(Some("99.0.0")).unwrap_err();
        assert!(new.contains("install the engram-mcp of engram 99.0.0"), "{new}");
        let none = check_extension(None).unwrap_err();
        assert!(none.contains("CREATE EXTENSION engram"), "{none}");
        let odd = check_extension(Some("0.13.0-beta")).unwrap_err();
        assert!(odd.contains("does not know"), "{odd}");
        // versions compare as numbers, not text
        assert!(check_extension(Some("0.9.0")).unwrap_err().contains("ALTER EXTENSION"));
    }

    #[test]
    fn an_installed_binary_finds_its_model() {
        let root = std::env::temp_dir().join(format!("engram-compat-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        // .engram/bin/engram-mcp -> .engram/models/...
        std::fs::create_dir_all(root.join("state/bin")).unwrap();
        std::fs::create_dir_all(root.join("state/models/all-MiniLM-L6-v2")).unwrap();
        let exe = root.join("state/bin/engram-mcp");
        assert_eq!(
            installed(Some(&exe), "models/all-MiniLM-L6-v2"),
            root.join("state/models/all-MiniLM-L6-v2")
        );
        // /usr/bin/engram-mcp -> /usr/share/engram/lib/...
        std::fs::create_dir_all(root.join("usr/bin")).unwrap();
        std::fs::create_dir_all(root.join("usr/share/engram/lib")).unwrap();
        std::fs::write(root.join("usr/share/engram/lib/libonnxruntime.so"), b"").unwrap();
        let exe = root.join("usr/bin/engram-mcp");
        assert_eq!(
            installed(Some(&exe), "lib/libonnxruntime.so"),
            root.join("usr/share/engram/lib/libonnxruntime.so")
        );
        // share/engram first: a system library in /usr/lib does not win
        std::fs::create_dir_all(root.join("usr/lib")).unwrap();
        std::fs::write(root.join("usr/lib/libonnxruntime.so"), b"").unwrap();
        assert_eq!(
            installed(Some(&exe), "lib/libonnxruntime.so"),
            root.join("usr/share/engram/lib/libonnxruntime.so")
        );
        // nothing installed: never the working directory, even with a
        // .engram there; the error names share/engram beside the binary
        let here = std::env::current_dir().unwrap();
        assert!(!installed(Some(&root.join("none/bin/engram-mcp")), "models/x").starts_with(&here));
        assert_eq!(
            installed(Some(&root.join("none/bin/engram-mcp")), "models/x"),
            root.join("none/share/engram/models/x")
        );
        assert_eq!(installed(None, "models/x"), Path::new("/usr/share/engram/models/x"));
        std::fs::remove_dir_all(&root).unwrap();
    }
}
