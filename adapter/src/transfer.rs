//! `engram-mcp export` and `engram-mcp import`: one owner's memories as JSON
//! Lines, one memory per line (engram.export_memories writes the objects;
//! engram.import_memory reads them back). The SQL functions hold the rules
//! (ids kept, idempotence, duplicates, dimension checks); this module pages,
//! streams, re-embeds on request and reports progress on stderr.

use crate::config::{ExportArgs, ImportArgs};
use anyhow::{bail, Context};
use engram_embed::Embedder;
use pgvector::Vector;
use serde_json::Value;
use std::io::{BufRead, BufReader, BufWriter, IsTerminal, Write};
use std::path::Path;
use std::time::{Duration, Instant};
use tokio_postgres::{Client, NoTls};

/// Memories per page of the export, and per transaction of the import.
const PAGE: i32 = 500;
const IMPORT_BATCH: usize = 64;

async fn connect(url: &str) -> anyhow::Result<Client> {
    let (client, conn) = tokio_postgres::connect(url, NoTls)
        .await
        .context("cannot connect to the database (--database-url)")?;
    tokio::spawn(async move {
        if let Err(e) = conn.await {
            tracing::error!(error = %e, "database connection");
        }
    });
    crate::db::check_extension_of(&client).await?;
    Ok(client)
}

/// Progress on stderr: one line rewritten in place on a terminal, a line
/// every few seconds otherwise (CI logs, pipes).
struct Progress {
    what: &'static str,
    total: u64,
    done: u64,
    tty: bool,
    printed: Instant,
}

impl Progress {
    fn new(what: &'static str, total: u64) -> Progress {
        Progress {
            what,
            total,
            done: 0,
            tty: std::io::stderr().is_terminal(),
            printed: Instant::now(),
        }
    }

    fn add(&mut self, n: u64) {
        self.done += n;
        if self.tty {
            eprint!("\r{} {}/{} memories", self.what, self.done, self.total);
        } else if self.printed.elapsed() >= Duration::from_secs(5) {
            eprintln!("{} {}/{} memories", self.what, self.done, self.total);
            self.printed = Instant::now();
        }
    }

    fn finish(&self, summary: &str) {
        if self.tty {
            eprintln!();
        }
        eprintln!("{summary}");
    }
}

pub async fn export(args: ExportArgs) -> anyhow::Result<()> {
    let db = connect(&args.database_url).await?;
    // One snapshot for every page: a consistent export while agents write.
    db.batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        .await?;
    // One owner, or every owner that has memories (in the same snapshot).
    let owners: Vec<String> = match &args.owner {
        Some(owner) => vec![owner.clone()],
        None => db
            .query("SELECT DISTINCT owner FROM engram.memories ORDER BY owner", &[])
            .await
            .context("cannot list the owners (export needs a DBA role)")?
            .iter()
            .map(|r| r.get(0))
            .collect(),
    };
    let total: i64 = db
        .query_one("SELECT count(*) FROM engram.memories WHERE owner = ANY($1)", &[&owners])
        .await
        .context("cannot count the memories (export needs a DBA role)")?
        .get(0);
    // Each memory carries the model its embedding comes from, when the
    // database records one: an import elsewhere compares it with its own.
    let model = recorded_model(&db).await?;
    let to_stdout = args.out.as_os_str() == "-";
    let partial = args.out.with_extension("jsonl.partial");
    let sink: Box<dyn Write> = if to_stdout {
        Box::new(std::io::stdout().lock())
    } else {
        Box::new(create_private(&partial)?)
    };
    let mut out = BufWriter::new(sink);
    let mut progress = Progress::new("exported", total as u64);
    for owner in &owners {
        let mut after: Option<uuid::Uuid> = None;
        loop {
            let rows = db
                .query(
                    "SELECT id, memory FROM engram.export_memories(owner => $1, after => $2, lim => $3)",
                    &[owner, &after, &PAGE],
                )
                .await
                .context("engram.export_memories failed")?;
            let Some(last) = rows.last() else { break };
            after = Some(last.get(0));
            for row in &rows {
                let mut memory: Value = row.get(1);
                let embedded = !memory["embedding"].is_null();
                if let (Some(m), Some(object), true) = (&model, memory.as_object_mut(), embedded) {
                    object.insert("embedding_model".into(), Value::String(m.clone()));
                }
                serde_json::to_writer(&mut out, &memory)?;
                out.write_all(b"\n")?;
            }
            progress.add(rows.len() as u64);
        }
    }
    db.batch_execute("COMMIT").await?;
    out.flush()?;
    let file = out.into_inner().map_err(|e| e.into_error())?;
    drop(file);
    if !to_stdout {
        std::fs::File::open(&partial)?.sync_all()?;
        // rename(2) replaces the directory entry FILE itself: a symbolic
        // link planted there is replaced, never written through.
        std::fs::rename(&partial, &args.out)
            .with_context(|| format!("cannot move {} to {}", partial.display(), args.out.display()))?;
    }
    let whose = match &args.owner {
        Some(owner) => owner.clone(),
        None => format!("{} owners", owners.len()),
    };
    progress.finish(&format!(
        "exported {} memories of {whose} to {}",
        progress.done,
        args.out.display()
    ));
    Ok(())
}

/// Creates `path` for the export, readable by its owner only (mode 0600: an
/// export holds every memory of an owner), refusing to follow or reuse
/// anything planted there: O_CREAT | O_EXCL fails on an existing name, a
/// symbolic link included, whatever it points to (POSIX), so nothing is
/// ever written through a link. A regular file left by an interrupted
/// export is removed first (unlink removes a name, never its target).
fn create_private(path: &Path) -> anyhow::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_file() => {
            std::fs::remove_file(path).with_context(|| format!("cannot remove the stale {}", path.display()))?
        }
        Ok(_) => bail!(
            "{} exists and is not a regular file (a symbolic link?); the export refuses to write through it: \
             remove it, or export to another path",
            path.display()
        ),
        Err(_) => {}
    }
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .with_context(|| {
            format!(
                "cannot create {} (it must not exist; the export writes only new files)",
                path.display()
            )
        })
}

/// The number of dimensions of an exported embedding (pgvector's text form).
fn dims_of(embedding: &str) -> usize {
    let inner = embedding.trim().trim_start_matches('[').trim_end_matches(']');
    if inner.trim().is_empty() {
        0
    } else {
        inner.split(',').count()
    }
}

fn lines(path: &Path) -> anyhow::Result<impl Iterator<Item = (usize, std::io::Result<String>)>> {
    let file = std::fs::File::open(path).with_context(|| format!("cannot read {}", path.display()))?;
    Ok(BufReader::new(file)
        .lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l))
        .filter(|(_, l)| !matches!(l, Ok(l) if l.trim().is_empty())))
}

/// What a file holds: its memories, and the distinct owners they name.
#[derive(Debug)]
struct FileSummary {
    memories: u64,
    owners: std::collections::BTreeSet<String>,
    /// The embedding models the file's memories name (`embedding_model`).
    models: std::collections::BTreeSet<String>,
}

/// Reads the whole file once before writing anything: every line a memory
/// object, and (unless re-embedding) every embedding of the database's
/// dimension. Returns the number of memories and the owners named.
fn check_file(path: &Path, dims: usize, reembed: bool) -> anyhow::Result<FileSummary> {
    let mut n = 0;
    let mut owners = std::collections::BTreeSet::new();
    let mut models = std::collections::BTreeSet::new();
    for (line, text) in lines(path)? {
        let text = text?;
        let memory: Value = serde_json::from_str(&text).with_context(|| {
            format!(
                "{}:{line}: not a JSON object (is this an engram export?)",
                path.display()
            )
        })?;
        if memory.get("id").and_then(Value::as_str).is_none() || memory.get("content").and_then(Value::as_str).is_none()
        {
            bail!(
                "{}:{line}: a memory needs an id and a content (is this an engram export?)",
                path.display()
            );
        }
        if let (false, Some(e)) = (reembed, memory.get("embedding").and_then(Value::as_str)) {
            let found = dims_of(e);
            if found != dims {
                bail!(
                    "{}:{line}: the exported embeddings have {found} dimensions but this database stores {dims}; \
                     run the import with --reembed to compute new ones with the configured embedder (--embedder)",
                    path.display()
                );
            }
        }
        if let Some(owner) = memory.get("owner").and_then(Value::as_str) {
            owners.insert(owner.to_string());
        }
        if let Some(model) = memory.get("embedding_model").and_then(Value::as_str) {
            models.insert(model.to_string());
        }
        n += 1;
    }
    Ok(FileSummary {
        memories: n,
        owners,
        models,
    })
}

/// The embedding model the database records (engram.embedding_model()).
async fn recorded_model(db: &Client) -> anyhow::Result<Option<String>> {
    Ok(db
        .query_one("SELECT engram.embedding_model()", &[])
        .await
        .context("cannot read the database's embedding model")?
        .get(0))
}

/// Why the file's embeddings cannot be stored as they are: they come from
/// another model than the one the database records (same dimension or
/// not), from several, or from one while the database records none. None
/// when they fit, or when the file names no model.
fn models_differ(path: &Path, file: &std::collections::BTreeSet<String>, recorded: Option<&str>) -> Option<String> {
    if file.len() > 1 {
        let named: Vec<&str> = file.iter().map(String::as_str).collect();
        return Some(format!(
            "{} holds embeddings of several models ({}); run the import with --reembed to compute them all \
             with the configured embedder",
            path.display(),
            named.join(", ")
        ));
    }
    let model = file.iter().next()?;
    let Some(recorded) = recorded else {
        return Some(format!(
            "{}'s embeddings come from the model {model}, and this database records no model: record it first \
             (SELECT engram.configure(embedding_model => '{model}')) so that another is refused later, or run \
             the import with --reembed",
            path.display()
        ));
    };
    (model != recorded).then(|| {
        format!(
            "{}'s embeddings come from the model {model}, but this database's come from {recorded}: vectors of \
             two models do not compare. Run the import with --reembed (with this database's model)",
            path.display()
        )
    })
}

/// The owner an import writes into: --owner, or else the one owner every
/// memory of the file names. A file never picks it silently: several
/// owners, or none, are refused before anything is written.
fn import_owner(
    path: &Path,
    given: Option<&str>,
    named: &std::collections::BTreeSet<String>,
) -> anyhow::Result<String> {
    if let Some(owner) = given {
        if owner.trim().is_empty() {
            bail!("--owner is empty; name the owner to import into");
        }
        return Ok(owner.to_string());
    }
    let shown: Vec<String> = named.iter().take(3).map(|o| engram_core::error::echo(o)).collect();
    match named.len() {
        1 => Ok(named.iter().next().cloned().unwrap_or_default()),
        0 => bail!(
            "{} names no owner; pass --owner to say whose memories these are",
            path.display()
        ),
        n => bail!(
            "{} names {n} owners ({}{}); pass --owner to import them all into one owner, or split the file",
            path.display(),
            shown.join(", "),
            if n > 3 { ", …" } else { "" }
        ),
    }
}

pub async fn import(args: ImportArgs) -> anyhow::Result<()> {
    let db = connect(&args.database_url).await?;
    let dims: i32 = db
        .query_one("SELECT engram._dims()", &[])
        .await
        .context("cannot read the database's embedding dimension (is engram installed?)")?
        .get(0);
    let summary = check_file(&args.file, dims as usize, args.reembed)?;
    let recorded = recorded_model(&db).await?;
    if !args.reembed {
        if let Some(why) = models_differ(&args.file, &summary.models, recorded.as_deref()) {
            bail!("{why}");
        }
    }
    let total = summary.memories;
    // --all-owners: each memory into the owner it names (every line must
    // name one); otherwise the one owner of the whole file.
    let owner = if args.all_owners {
        if summary.owners.is_empty() {
            bail!(
                "{} names no owner; --all-owners imports each memory into the owner it names",
                args.file.display()
            );
        }
        String::new()
    } else {
        import_owner(&args.file, args.owner.as_deref(), &summary.owners)?
    };
    let into = if args.all_owners {
        format!("the {} owners the file names", summary.owners.len())
    } else {
        format!("owner {}", engram_core::error::echo(&owner))
    };
    eprintln!(
        "importing {total} memories into {into}{}",
        if args.keep_provenance {
            " (keeping the file's source, author, trust and revision authors: --keep-provenance)"
        } else {
            ""
        }
    );
    let embedder: Option<Box<dyn Embedder>> = if args.reembed {
        let e = crate::build_embedder(&args.embedder, dims as usize)?;
        if e.dims() != dims as usize {
            bail!(
                "--reembed: the embedder {} produces {} dimensions but the database stores {dims}",
                e.name(),
                e.dims()
            );
        }
        if let Some(why) = crate::model_mismatch(recorded.as_deref(), &e.model()) {
            bail!("--reembed: {why}");
        }
        Some(e)
    } else {
        None
    };
    let call = db
        .prepare("SELECT engram.import_memory(owner => $1, memory => $2, embedding => $3, keep_provenance => $4)")
        .await
        .context("cannot prepare engram.import_memory (import needs a DBA role)")?;
    let mut progress = Progress::new("imported", total);
    let mut tally = std::collections::BTreeMap::<String, u64>::new();
    let mut batch: Vec<(usize, Value)> = Vec::with_capacity(IMPORT_BATCH);
    let mut it = lines(&args.file)?.peekable();
    while it.peek().is_some() {
        batch.clear();
        while batch.len() < IMPORT_BATCH {
            let Some((line, text)) = it.next() else { break };
            let mut memory: Value = serde_json::from_str(&text?)?;
            if let Some(object) = memory.as_object_mut() {
                object.remove("embedding_model");
            }
            batch.push((line, memory));
        }
        let vectors: Vec<Option<Vector>> = match &embedder {
            Some(e) => {
                let texts: Vec<String> = batch
                    .iter()
                    .map(|(_, m)| m["content"].as_str().unwrap_or_default().to_string())
                    .collect();
                e.embed(&texts)
                    .await
                    .context("--reembed: the embedder failed")?
                    .into_iter()
                    .map(|v| Some(Vector::from(v)))
                    .collect()
            }
            None => vec![None; batch.len()],
        };
        // One transaction per batch: a failure stops the import with the
        // batches before it committed; running it again skips them.
        db.batch_execute("BEGIN").await?;
        for ((line, memory), vector) in batch.iter().zip(&vectors) {
            let owner_of_line = if args.all_owners {
                match memory.get("owner").and_then(Value::as_str) {
                    Some(o) => o.to_string(),
                    None => {
                        let _ = db.batch_execute("ROLLBACK").await;
                        bail!(
                            "{}:{line}: the memory names no owner (--all-owners imports each into the owner it names)",
                            args.file.display()
                        );
                    }
                }
            } else {
                owner.clone()
            };
            let status: String = match db
                .query_one(&call, &[&owner_of_line, memory, vector, &args.keep_provenance])
                .await
            {
                Ok(row) => row.get(0),
                Err(e) => {
                    let _ = db.batch_execute("ROLLBACK").await;
                    let why = e
                        .as_db_error()
                        .map(|d| d.message().to_string())
                        .unwrap_or(e.to_string());
                    bail!(
                        "{}:{line}: {why}; the memories before this batch are imported, and running the \
                         import again skips them",
                        args.file.display()
                    );
                }
            };
            *tally.entry(status).or_default() += 1;
        }
        db.batch_execute("COMMIT").await?;
        progress.add(batch.len() as u64);
    }
    let parts: Vec<String> = ["created", "exists", "duplicate"]
        .iter()
        .map(|s| format!("{} {s}", tally.get(*s).copied().unwrap_or(0)))
        .collect();
    progress.finish(&format!(
        "imported {} memories from {}: {}",
        progress.done,
        args.file.display(),
        parts.join(", ")
    ));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_of_another_model_is_refused_without_reembed() {
        let path = Path::new("alice.jsonl");
        let set = |names: &[&str]| names.iter().map(|s| s.to_string()).collect();
        assert_eq!(models_differ(path, &set(&["m1"]), Some("m1")), None);
        assert_eq!(
            models_differ(path, &set(&[]), Some("m1")),
            None,
            "an older export names no model"
        );
        let e = models_differ(path, &set(&["m1"]), None).unwrap();
        assert!(
            e.contains("records no model") && e.contains("embedding_model => 'm1'"),
            "{e}"
        );
        let e = models_differ(path, &set(&["m2"]), Some("m1")).unwrap();
        assert!(e.contains("m2") && e.contains("m1") && e.contains("--reembed"), "{e}");
        assert!(models_differ(path, &set(&["m1", "m2"]), Some("m1"))
            .unwrap()
            .contains("several"));
    }

    #[test]
    fn dims_of_pgvector_text() {
        assert_eq!(dims_of("[1,2,3]"), 3);
        assert_eq!(dims_of(" [0.5] "), 1);
        assert_eq!(dims_of("[]"), 0);
    }

    #[test]
    fn a_file_of_another_dimension_is_refused_before_writing() {
        let dir = std::env::temp_dir().join(format!("engram-transfer-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("m.jsonl");
        std::fs::write(&f, "{\"id\":\"a\",\"content\":\"x\",\"embedding\":\"[1,2,3]\"}\n\n").unwrap();
        let e = check_file(&f, 4, false).unwrap_err().to_string();
        assert!(e.contains("--reembed") && e.contains(":1:"), "{e}");
        assert_eq!(check_file(&f, 4, true).unwrap().memories, 1);
        assert_eq!(check_file(&f, 3, false).unwrap().memories, 1);
        std::fs::write(&f, "{\"content\":\"x\"}\n").unwrap();
        assert!(check_file(&f, 3, false).unwrap_err().to_string().contains("an id"));
        std::fs::write(&f, "not json\n").unwrap();
        assert!(check_file(&f, 3, false)
            .unwrap_err()
            .to_string()
            .contains("not a JSON object"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_owner_is_given_or_the_files_only_one() {
        let p = Path::new("m.jsonl");
        let set = |v: &[&str]| {
            v.iter()
                .map(|s| s.to_string())
                .collect::<std::collections::BTreeSet<_>>()
        };
        assert_eq!(import_owner(p, Some("wes"), &set(&["vic", "bob"])).unwrap(), "wes");
        assert_eq!(import_owner(p, None, &set(&["vic"])).unwrap(), "vic");
        let e = import_owner(p, None, &set(&["alice", "bob"])).unwrap_err().to_string();
        assert!(e.contains("2 owners") && e.contains("--owner"), "{e}");
        assert!(import_owner(p, None, &set(&[]))
            .unwrap_err()
            .to_string()
            .contains("--owner"));
        assert!(import_owner(p, Some(" "), &set(&["vic"])).is_err());
    }

    #[test]
    fn export_files_are_private_and_never_written_through_a_link() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("engram-export-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let target = dir.join("victim");
        std::fs::write(&target, "keep me").unwrap();
        let partial = dir.join("out.jsonl.partial");
        std::os::unix::fs::symlink(&target, &partial).unwrap();
        let e = create_private(&partial).unwrap_err().to_string();
        assert!(e.contains("not a regular file"), "{e}");
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep me");
        std::fs::remove_file(&partial).unwrap();
        // a stale partial of an interrupted export is replaced; the new file is 0600
        std::fs::write(&partial, "stale").unwrap();
        let mut f = create_private(&partial).unwrap();
        f.write_all(b"{}\n").unwrap();
        let mode = std::fs::metadata(&partial).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert_eq!(std::fs::read_to_string(&partial).unwrap(), "{}\n");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
