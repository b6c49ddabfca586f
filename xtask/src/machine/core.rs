//! One host core for a QEMU whose CPUs take turns on its one vCPU thread
//! ([`super::replay::takes_turns`]: several CPUs under icount or the model
//! on single-threaded TCG).
//!
//! Why: such a QEMU has two busy host threads, the vCPU thread and the
//! main loop, which under `-icount sleep=off` advances the virtual clock
//! when every vCPU is idle and then kicks the vCPU thread. On two cores
//! the kick lands wherever the host's timing puts it and ends a CPU's turn
//! early, so QEMU's interleaving of the CPUs, and the model plugin's file,
//! which follows it, moved from boot to boot (docs/threads.md, "When a
//! multi-CPU boot moves"). With both threads on one core, the main loop
//! runs only where the vCPU thread lets the core go, and the boots agreed.
//!
//! Which core: the first of the process's allowed cores that no other boot
//! holds, held through an exclusive `flock` on `target/xtask/cores/N` (the
//! test run's commands are separate processes, so the lock is a file),
//! released when the boot ends; with every core held, the core after the
//! last one taken, unheld (two boots then share it, slower, still on one
//! core each).

use std::fs::File;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::kbuild;

/// A core chosen for one boot, held while this lives.
pub struct Core {
    pub cpu: usize,
    _lock: Option<File>,
}

/// The host cores this process may run on.
fn allowed() -> Vec<usize> {
    // SAFETY: a zeroed cpu_set_t is an empty set; sched_getaffinity writes
    // at most size_of::<cpu_set_t>() bytes into it.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: pid 0 is this thread; the size is the set's own.
    let r = unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if r != 0 {
        return Vec::new();
    }
    (0..libc::CPU_SETSIZE as usize)
        // SAFETY: every index is below CPU_SETSIZE, the set's size in bits.
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .collect()
}

/// Where the cores' lock files are.
fn dir() -> std::path::PathBuf {
    kbuild::root().join("target/xtask/cores")
}

/// Tries to hold core `cpu` for this boot: an exclusive, non-blocking
/// `flock` on its file in `dir` (made).
fn hold(dir: &std::path::Path, cpu: usize) -> Option<File> {
    let f = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(dir.join(cpu.to_string()))
        .ok()?;
    // SAFETY: the descriptor is f's, open for as long as f lives; flock
    // takes no pointer.
    let r = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    (r == 0).then_some(f)
}

/// A core for the next boot: one no other boot holds if there is one, else
/// the next in turn (see the module doc); `None` if the process's cores
/// cannot be read.
pub fn choose() -> Option<Core> {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let cores = allowed();
    if cores.is_empty() {
        return None;
    }
    let dir = dir();
    let _ = std::fs::create_dir_all(&dir);
    for &cpu in &cores {
        if let Some(lock) = hold(&dir, cpu) {
            return Some(Core {
                cpu,
                _lock: Some(lock),
            });
        }
    }
    let cpu = cores[NEXT.fetch_add(1, Ordering::Relaxed) % cores.len()];
    Some(Core { cpu, _lock: None })
}

/// Makes `c` start on `cpu` alone, with every thread it starts (a thread
/// inherits its creator's affinity).
pub fn pin(c: &mut std::process::Command, cpu: usize) {
    use std::os::unix::process::CommandExt;
    // SAFETY: the closure runs in the child between fork and exec, and does
    // only what is safe there: it fills a set on its own stack and makes
    // one system call, sched_setaffinity, which allocates nothing.
    unsafe {
        c.pre_exec(move || {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu, &mut set);
            if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A held core is not handed out again while held, and is once
    /// released.
    #[test]
    fn a_held_core_is_not_chosen_again_until_released() {
        let cores = allowed();
        assert!(!cores.is_empty(), "this process runs on some core");
        let first = choose().expect("a core");
        assert!(cores.contains(&first.cpu));
        let second = choose().expect("a core");
        if first._lock.is_some() && second._lock.is_some() {
            assert_ne!(second.cpu, first.cpu);
        }
        drop(second);
        let cpu = first.cpu;
        drop(first);
        let again = hold(&dir(), cpu);
        assert!(again.is_some(), "released with the boot");
    }

    /// A command pinned to a core runs there alone.
    #[test]
    fn a_pinned_command_runs_on_its_core_alone() {
        let cpu = *allowed().first().expect("a core");
        let mut c = std::process::Command::new("grep");
        c.args(["Cpus_allowed_list", "/proc/self/status"]);
        pin(&mut c, cpu);
        let out = c.output().expect("grep runs");
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(
            text.split_whitespace().nth(1),
            Some(cpu.to_string().as_str()),
            "{text}"
        );
    }
}
