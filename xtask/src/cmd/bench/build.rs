//! Step 1: each variant's kernel and programs, built apart; a variant of
//! another revision is built in a git worktree cached by commit.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use crate::kbuild::{self, git_in, Artifacts};

use super::plan::Variant;

/// Step 1: each variant's kernel and programs, built apart into `own` (this
/// call's directory: two benches side by side may both name a variant
/// `after`, with other features); revisions in worktrees under `tmp`,
/// cached by commit.
pub(super) fn build_variants(
    variants: &[Variant],
    tmp: &Path,
    own: &Path,
) -> Result<Vec<Artifacts>> {
    let mut used = Vec::new();
    let builds = variants
        .iter()
        .map(|v| {
            eprintln!("bench: building variant {}", v.name);
            build_variant(v, tmp, own, &mut used)
        })
        .collect::<Result<Vec<_>>>()?;
    if variants.iter().any(|v| v.rev.is_some()) {
        prune_worktrees(&kbuild::root(), tmp, &used);
    }
    Ok(builds)
}

fn build_variant(v: &Variant, tmp: &Path, own: &Path, used: &mut Vec<String>) -> Result<Artifacts> {
    let dest = own.join(format!("variant-{}", v.name));
    match &v.rev {
        None => kbuild::build_into(&kbuild::root(), &v.features, &dest, None),
        Some(rev) => {
            let root = kbuild::root();
            let commit = resolve_commit(&root, rev)?;
            let dir = rev_dir(tmp, &commit);
            worktree(&root, &dir, &commit).with_context(|| format!("variant {}", v.name))?;
            // Mark it used now, for the pruning of the least recently used.
            let _ = std::fs::File::open(&dir)
                .and_then(|f| f.set_modified(std::time::SystemTime::now()));
            used.push(
                dir.file_name()
                    .unwrap_or_default()
                    .to_string_lossy()
                    .into_owned(),
            );
            kbuild::build_into(&dir, &v.features, &dest, None)
                .with_context(|| format!("variant {}: building {rev}", v.name))
        }
    }
}

/// How many revision worktrees stay cached besides the ones a call uses.
pub(super) const CACHED_REVS: usize = 4;

/// The commit `rev` names in the repository at `root`.
pub(super) fn resolve_commit(root: &Path, rev: &str) -> Result<String> {
    let o = git_in(root)
        .args(["rev-parse", "--verify", "--quiet"])
        .arg(format!("{rev}^{{commit}}"))
        .output()
        .context("cannot run git")?;
    if !o.status.success() {
        bail!("--rev {rev:?}: not a commit in this repository");
    }
    Ok(String::from_utf8_lossy(&o.stdout).trim().to_string())
}

/// The worktree directory of a commit: one per commit, reused by later
/// calls (so cargo's incremental build in it is reused too).
pub(super) fn rev_dir(tmp: &Path, commit: &str) -> PathBuf {
    tmp.join(format!("rev-{}", &commit[..commit.len().min(12)]))
}

/// Which cached worktrees to remove: those not `used` by this call, beyond
/// the `keep` most recently used (`cached`: name and last use, any order).
pub fn stale_worktrees(
    mut cached: Vec<(String, std::time::SystemTime)>,
    used: &[String],
    keep: usize,
) -> Vec<String> {
    cached.retain(|(n, _)| !used.contains(n));
    cached.sort_by_key(|c| std::cmp::Reverse(c.1));
    cached.into_iter().skip(keep).map(|(n, _)| n).collect()
}

/// A checked-out worktree of `commit` at `dir`, reused when it is there.
pub(super) fn worktree(root: &Path, dir: &Path, commit: &str) -> Result<()> {
    let head = git_in(dir)
        .args(["rev-parse", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
    if head.as_deref() == Some(commit) && dir.join("Cargo.toml").is_file() {
        return Ok(());
    }
    let _ = git_in(root)
        .args(["worktree", "remove", "--force"])
        .arg(dir)
        .output();
    let o = git_in(root)
        .args(["worktree", "add", "--detach", "--force"])
        .arg(dir)
        .arg(commit)
        .output()
        .context("cannot run git")?;
    if !o.status.success() {
        bail!(
            "cannot check out {commit}: {}",
            String::from_utf8_lossy(&o.stderr).trim()
        );
    }
    Ok(())
}

/// Removes the cached worktrees this call did not use, beyond the
/// [`CACHED_REVS`] most recently used.
fn prune_worktrees(root: &Path, tmp: &Path, used: &[String]) {
    let cached: Vec<(String, std::time::SystemTime)> = std::fs::read_dir(tmp)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with("rev-"))
        .map(|e| {
            let t = e
                .metadata()
                .and_then(|m| m.modified())
                .unwrap_or(std::time::UNIX_EPOCH);
            (e.file_name().to_string_lossy().into_owned(), t)
        })
        .collect();
    for name in stale_worktrees(cached, used, CACHED_REVS) {
        eprintln!("bench: removing the cached worktree {name}");
        let _ = git_in(root)
            .args(["worktree", "remove", "--force"])
            .arg(tmp.join(&name))
            .output();
    }
    let _ = git_in(root).args(["worktree", "prune"]).output();
}
