//! Building the kernel and the user programs for `i686-testbed.json`.
//!
//! The build-std flags live here and nowhere else: in `.cargo/config.toml`
//! they would rebuild `core` for the host crates too.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

use crate::preflight;

pub const TARGET_SPEC: &str = "i686-testbed.json";
/// The user programs, each a Multiboot module named after its binary.
pub const USER_PROGRAMS: &[&str] = &[
    "bench", "utest", "faults", "locks", "fuzz", "chase", "rogue", "strings", "procs", "forktest",
    "lmbench",
];

/// What a build produced.
#[derive(Clone, Debug)]
pub struct Artifacts {
    pub kernel: PathBuf,
    /// (path, name) of each user program.
    pub programs: Vec<(PathBuf, String)>,
}

impl Artifacts {
    /// The kernel, then each program.
    pub fn files(&self) -> impl Iterator<Item = &PathBuf> {
        std::iter::once(&self.kernel).chain(self.programs.iter().map(|(p, _)| p))
    }
}

/// The workspace root (xtask's parent).
/// The xtask binary, for a command of its own run as a child. While a test
/// run goes on, its host unit tests (`cargo test -p abi -p xtask -p model`)
/// may link the binary anew, with the features of shared dependencies
/// unified across the three: the running process's file is then unlinked,
/// and Linux names it `PATH (deleted)`. The file now at that path is built
/// from the same sources, so a child runs that one.
pub fn xtask_exe() -> std::io::Result<PathBuf> {
    let exe = std::env::current_exe()?;
    if exe.exists() {
        return Ok(exe);
    }
    let shown = exe.to_string_lossy().into_owned();
    match shown.strip_suffix(" (deleted)") {
        Some(p) if Path::new(p).exists() => Ok(PathBuf::from(p)),
        _ => Err(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!("the xtask binary {shown} is gone"),
        )),
    }
}

pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives in the workspace")
        .to_path_buf()
}

/// The cargo arguments of the kernel build, for `dir` (a workspace).
pub fn cargo_args(features: &[String]) -> Vec<String> {
    let mut a: Vec<String> = [
        "build",
        "--release",
        "-p",
        "kernel",
        "-p",
        "userland",
        "--target",
        TARGET_SPEC,
        "-Zjson-target-spec",
        "-Zbuild-std=core,compiler_builtins",
        "-Zbuild-std-features=compiler-builtins-mem",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    if !features.is_empty() {
        a.push("--features".into());
        a.push(
            features
                .iter()
                .map(|f| format!("kernel/{f}"))
                .collect::<Vec<_>>()
                .join(","),
        );
    }
    a
}

/// The feature names of a `Cargo.toml`'s `[features]` table, in file
/// order: each line of the table that starts with a bare key and `=`
/// (an array spread over several lines continues with lines that do not).
pub fn features_of(cargo_toml: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut inside = false;
    for line in cargo_toml.lines().map(str::trim) {
        if line.starts_with('[') {
            inside = line == "[features]";
            continue;
        }
        let Some((key, _)) = line.split_once('=') else {
            continue;
        };
        let key = key.trim();
        let bare = !key.is_empty()
            && key
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        if inside && bare {
            names.push(key.to_string());
        }
    }
    names
}

/// The kernel's features at `rev` (`None`: the working tree's), from its
/// `kernel/Cargo.toml`; `None` when that file cannot be read.
pub fn kernel_features(rev: Option<&str>) -> Option<Vec<String>> {
    const FILE: &str = "kernel/Cargo.toml";
    let text = match rev {
        None => std::fs::read_to_string(root().join(FILE)).ok()?,
        Some(r) => {
            let o = git_in(&root())
                .args(["show", &format!("{r}:{FILE}")])
                .output()
                .ok()?;
            if !o.status.success() {
                return None;
            }
            String::from_utf8(o.stdout).ok()?
        }
    };
    Some(features_of(&text))
}

/// Refuses a feature the kernel does not have (`known`: its features),
/// naming the ones it has; `what` says whose features they are.
pub fn check_features(what: &str, asked: &[String], known: &[String]) -> Result<()> {
    let bad: Vec<&str> = asked
        .iter()
        .filter(|f| !known.contains(f))
        .map(String::as_str)
        .collect();
    if bad.is_empty() {
        return Ok(());
    }
    bail!(
        "{what}: no kernel feature {}; kernel/Cargo.toml's features: {}",
        bad.iter()
            .map(|b| format!("{b:?}"))
            .collect::<Vec<_>>()
            .join(", "),
        if known.is_empty() {
            "none".to_string()
        } else {
            known.join(", ")
        }
    )
}

/// What a build says before it starts: `building the kernel and user
/// programs (features exercise-sysexit-always) in DIR ...` (the workspace
/// only when it is not this one).
pub fn build_line(dir: &Path, features: &[String]) -> String {
    let mut s = String::from("building the kernel and user programs");
    if !features.is_empty() {
        s += &format!(" (features {})", features.join(","));
    }
    if dir != root() {
        s += &format!(" in {}", dir.display());
    }
    s + " ..."
}

/// Where the builds of `dir`'s workspace with `features` go: cargo's usual
/// target directory for the default build, and `target/exercise` beside
/// it for any other. The kernel the default build leaves at
/// `target/i686-testbed/release/kernel` is booted from there by every
/// command that asks for no features; a build with features in the same
/// target directory would put its kernel in that place, under a command
/// booting it in another process (the book's check runs commands side by
/// side, and a forktest once booted a bench's `lfence` kernel that way).
pub fn target_dir_of(dir: &Path, features: &[String]) -> PathBuf {
    if features.is_empty() {
        dir.join("target")
    } else {
        dir.join("target/exercise")
    }
}

/// Builds kernel and user programs in the workspace at `dir`, into
/// [`target_dir_of`] unless `target_dir` names another. Never silent: a
/// line on stderr says what is built and, at the end, how long it took;
/// when stderr is a terminal, cargo's own progress shows between (a first
/// build takes minutes), `quiet` or not. With `artifact_dir`, cargo also
/// copies the kernel and the programs there while it holds its lock on the
/// target directory, so no other build can replace them first.
fn cargo_build(
    dir: &Path,
    features: &[String],
    quiet: bool,
    target_dir: Option<&Path>,
    artifact_dir: Option<&Path>,
) -> Result<Artifacts> {
    preflight::ensure_rust_src(dir)?;
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let target = target_dir
        .map(Path::to_path_buf)
        .unwrap_or_else(|| target_dir_of(dir, features));
    let mut cmd = Command::new(cargo);
    cmd.args(cargo_args(features))
        .current_dir(dir)
        .env("CARGO_TARGET_DIR", &target);
    if let Some(a) = artifact_dir {
        cmd.args(["-Zunstable-options", "--artifact-dir"]).arg(a);
    }
    cmd.env("TESTBED_REV", revision(dir));
    use std::io::IsTerminal as _;
    if quiet && !std::io::stderr().is_terminal() {
        cmd.arg("--quiet");
    }
    eprintln!("{}", build_line(dir, features));
    let started = std::time::Instant::now();
    let status = cmd.status().context("cannot run cargo")?;
    if !status.success() {
        bail!("the kernel build failed (cargo exited with {status})");
    }
    eprintln!("built in {:.1} s", started.elapsed().as_secs_f64());
    let out = artifact_dir
        .map(Path::to_path_buf)
        .unwrap_or_else(|| target.join("i686-testbed/release"));
    let a = Artifacts {
        kernel: out.join("kernel"),
        programs: USER_PROGRAMS
            .iter()
            .map(|p| (out.join(p), p.to_string()))
            .collect(),
    };
    for p in a.files() {
        if !p.is_file() {
            bail!("the build did not produce {}", p.display());
        }
    }
    Ok(a)
}

/// `git` run on the repository at `dir`, whatever repository the
/// environment names: git's hooks and `git rebase --exec` export `GIT_DIR`
/// (and may export the variables beside it), which would make every command
/// here act on that repository instead (a `git init` in a scratch
/// directory reinitialised it as a bare one).
pub fn git_in(dir: &Path) -> Command {
    let mut c = Command::new("git");
    for v in [
        "GIT_DIR",
        "GIT_WORK_TREE",
        "GIT_INDEX_FILE",
        "GIT_COMMON_DIR",
        "GIT_OBJECT_DIRECTORY",
        "GIT_ALTERNATE_OBJECT_DIRECTORIES",
        "GIT_PREFIX",
    ] {
        c.env_remove(v);
    }
    c.current_dir(dir);
    c
}

/// The revision of the tree at `dir` as the kernel reports it: `git
/// describe`, and for a tree with uncommitted changes `-dirty.` and the
/// first 12 hex digits of the hash git gives the diff against HEAD (so two
/// different edits of one commit are told apart). `unknown` outside git.
pub fn revision(dir: &Path) -> String {
    let git = |args: &[&str], input: Option<&[u8]>| -> Option<String> {
        use std::io::Write as _;
        let mut child = git_in(dir)
            .args(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .ok()?;
        let mut stdin = child.stdin.take()?;
        if let Some(i) = input {
            stdin.write_all(i).ok()?;
        }
        drop(stdin);
        let o = child.wait_with_output().ok()?;
        o.status
            .success()
            .then(|| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    let Some(describe) = git(&["describe", "--always", "--dirty", "--abbrev=12"], None) else {
        return "unknown".into();
    };
    if !describe.ends_with("-dirty") {
        return describe;
    }
    let diff = git(&["diff", "HEAD", "--binary"], None).unwrap_or_default();
    let hash = git(&["hash-object", "--stdin"], Some(diff.as_bytes())).unwrap_or_default();
    format!("{describe}.{}", &hash[..hash.len().min(DIFF_HASH_DIGITS)])
}

/// Hex digits of the diff's hash a dirty revision carries.
const DIFF_HASH_DIGITS: usize = 12;

/// Builds, then puts the kernel and the programs in `dest`, so builds with
/// other features or revisions (which cargo writes to the same place) do not
/// overwrite each other. Cargo copies them into a directory of this call's
/// own under its lock, and each is renamed into `dest` whole: a boot that
/// reads `dest` while another process builds the same thing there reads
/// one build's file or the other's, never a mix or a half-written one.
pub fn build_into(
    dir: &Path,
    features: &[String],
    dest: &Path,
    target_dir: Option<&Path>,
) -> Result<Artifacts> {
    std::fs::create_dir_all(dest).with_context(|| format!("cannot create {}", dest.display()))?;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let staging = dest.join(format!(".building-{}-{nanos}", std::process::id()));
    let built = cargo_build(dir, features, true, target_dir, Some(&staging));
    let placed = built.and_then(|a| {
        let put = |p: &Path| -> Result<PathBuf> {
            let to = dest.join(p.file_name().context("artifact name")?);
            // A copy, not the hard link cargo made to its own file: a later
            // build may write that file again.
            let tmp = staging.join(".copy");
            std::fs::copy(p, &tmp).with_context(|| format!("cannot copy {}", p.display()))?;
            std::fs::rename(&tmp, &to).with_context(|| format!("cannot write {}", to.display()))?;
            Ok(to)
        };
        Ok(Artifacts {
            kernel: put(&a.kernel)?,
            programs: a
                .programs
                .iter()
                .map(|(p, n)| Ok((put(p)?, n.clone())))
                .collect::<Result<_>>()?,
        })
    });
    let _ = std::fs::remove_dir_all(&staging);
    placed
}

/// Builds kernel and user programs with no features in this workspace (see
/// [`cargo_build`]); the artifacts stay where cargo put them.
pub fn build(quiet: bool) -> Result<Artifacts> {
    cargo_build(&root(), &[], quiet, None, None)
}

/// For tests: a fresh git repository `name` in the temporary directory,
/// whose one commit holds `file` with `text`.
#[cfg(test)]
pub fn one_commit_repo(name: &str, file: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let git = |args: &[&str]| {
        let ok = git_in(&dir)
            .args(["-c", "user.name=t", "-c", "user.email=t@t"])
            .args(args)
            .output()
            .unwrap()
            .status
            .success();
        assert!(ok, "git {args:?}");
    };
    git(&["init", "-q"]);
    std::fs::write(dir.join(file), text).unwrap();
    git(&["add", file]);
    git(&["commit", "-q", "-m", "one"]);
    dir
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_uncommitted_edit_is_a_dirty_revision_with_its_hash() {
        let dir = one_commit_repo(&format!("testbed-rev-{}", std::process::id()), "f", "nop\n");
        let clean = revision(&dir);
        assert!(!clean.contains("dirty") && clean.len() == 12, "{clean}");
        std::fs::write(dir.join("f"), "nop\nnop\n").unwrap();
        let one = revision(&dir);
        std::fs::write(dir.join("f"), "nop\nnop\nnop\n").unwrap();
        let two = revision(&dir);
        assert!(one.starts_with(&format!("{clean}-dirty.")), "{one}");
        assert_eq!(one.len(), clean.len() + "-dirty.".len() + DIFF_HASH_DIGITS);
        assert_ne!(one, two, "two edits of one commit must differ");
        let (dirty, diff) = crate::results::dirty_of_rev(&one);
        assert!(dirty && diff.len() == DIFF_HASH_DIGITS);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_kernel_features_are_read_from_its_cargo_toml() {
        let toml = "[package]\nname = \"kernel\"\n\n[features]\n# a comment\nexercise-a = []\nlong = [\n  \"x\",\n]\ntest_b=[]\n\n[dependencies]\nabi = { path = \"../abi\" }\n";
        assert_eq!(features_of(toml), ["exercise-a", "long", "test_b"]);
        // This workspace's kernel: the exercises are among them.
        let known = kernel_features(None).unwrap();
        assert!(
            known.iter().any(|f| f == "exercise-sysexit-always"),
            "{known:?}"
        );
        let e = check_features(
            "variant b",
            &[
                "exercise-sysexit-always".into(),
                "exercise-sysexit-alway".into(),
            ],
            &known,
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.starts_with("variant b: no kernel feature \"exercise-sysexit-alway\"; kernel/Cargo.toml's features: ")
                && e.contains("exercise-sysexit-always"),
            "{e}"
        );
    }
}
