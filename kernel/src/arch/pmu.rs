//! Architectural performance counters (Intel SDM Vol. 3B §20.2): where CPUID
//! leaf 0xA reports version 2 or later with at least two fixed-function
//! counters, fixed counter 0 counts instructions retired and fixed counter 1
//! core cycles, in rings 0 and 3, and CR4.PCE lets ring 3 read them with
//! RDPMC.
//!
//! CPUID is a claim, not a proof: an emulator or a hypervisor may advertise
//! the leaf and not back it (Bochs 2.7's Core 2 and Sandy Bridge models do;
//! QEMU's TCG advertises nothing). So [`init`] programs the counters, reads
//! each with RDPMC in ring 0 under the exception table, checks that both
//! moved across a loop of known length, and only then sets CR4.PCE. Any
//! step that fails is the reason the counters are "n/a".
//!
//! Should a ring-3 RDPMC fault anyway (a CPU whose CR4.PCE was never set,
//! counters that stopped, `pmc=pretend`), [`user_fault`] turns them off for
//! the rest of the boot and resumes the program after the instruction with
//! EDX:EAX = 0; `cpuinfo` stops offering them, so a benchmark goes on
//! without them. A benchmark never dies of a counter.

use core::arch::asm;
use core::fmt;
use core::sync::atomic::{AtomicBool, Ordering};

use abi::cmdline::Pmc;
use abi::exit::vector_name;
use abi::report::kind;
use abi::syscall::RDPMC_FIXED;

use abi::layout::{USER_BASE, USER_TOP};

use super::cpu::Features;
use super::exceptions::{last_fixup_vector, TrapFrame};
use super::paging::{self, PRESENT, USER};
use crate::console::Text;
use crate::sync::cell::SetOnce;
use crate::{kprintln, record};

/// IA32_FIXED_CTR_CTRL: 4 bits per fixed counter; 0b0011 = count in rings 0 and 3.
const IA32_FIXED_CTR_CTRL: u32 = 0x38D;
/// IA32_PERF_GLOBAL_CTRL: bit 32 + i enables fixed counter i.
const IA32_PERF_GLOBAL_CTRL: u32 = 0x38F;
const FIXED_0_AND_1_ALL_RINGS: u64 = 0x33;
const GLOBAL_FIXED_0_AND_1: u64 = (1 << 32) | (1 << 33);
/// CR4.PCE: RDPMC allowed at any privilege level.
const CR4_PCE: u32 = 1 << 8;
/// The fixed counters the benchmarks read: 0 = instructions retired, 1 = core cycles.
const FIXED_COUNTERS: [(u32, &str); 2] = [(0, "instructions retired"), (1, "core cycles")];
/// The leaf-0xA version that has fixed-function counters (SDM Vol. 3B §20.2.2).
const MIN_VERSION: u8 = 2;
/// RDPMC's encoding, `0F 33`.
const RDPMC_OPCODE: [u8; 2] = [0x0f, 0x33];

/// The known work the check counts across: this many `decl; jnz` pairs.
const WORK_ITERATIONS: u32 = 1000;
/// The work's instructions: fixed counter 0 must count at least these.
const WORK_INSTRUCTIONS: u64 = 2 * WORK_ITERATIONS as u64;

/// Why the counters are not used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unusable {
    /// `pmc=off` on the command line.
    Disabled,
    /// CPUID leaf 0xA version 0 (or no such leaf).
    NoPerfmon,
    /// Version 1: general counters only.
    Version(u8),
    /// Fewer than two fixed counters.
    FixedCounters(u8),
    /// WRMSR to a counter MSR raised an exception.
    Msr { msr: u32, vector: u8 },
    /// RDPMC of a fixed counter raised an exception in ring 0.
    Rdpmc { counter: u32, vector: u8 },
    /// A fixed counter read the same before and after the known work.
    Stuck { counter: u32, value: u64 },
    /// Fixed counter 0 counted fewer instructions than the work has.
    TooFew { counted: u64 },
}

impl fmt::Display for Unusable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Unusable::Disabled => write!(f, "pmc=off on the command line"),
            Unusable::NoPerfmon => write!(
                f,
                "CPUID leaf 0xA reports no architectural performance monitoring"
            ),
            Unusable::Version(v) => write!(
                f,
                "CPUID leaf 0xA reports version {v}; fixed counters need version {MIN_VERSION}"
            ),
            Unusable::FixedCounters(n) => write!(
                f,
                "CPUID leaf 0xA reports {n} fixed counter(s); the benchmarks need {}",
                FIXED_COUNTERS.len()
            ),
            Unusable::Msr { msr, vector } => write!(
                f,
                "WRMSR {:#x} raised {} in ring 0",
                msr,
                vector_name(vector)
            ),
            Unusable::Rdpmc { counter, vector } => write!(
                f,
                "RDPMC of fixed counter {} ({}) raised {} in ring 0 although CPUID offers it",
                counter,
                counter_name(counter),
                vector_name(vector)
            ),
            Unusable::Stuck { counter, value } => write!(
                f,
                "fixed counter {} ({}) did not count: it read {:#x} before and after {} instructions",
                counter,
                counter_name(counter),
                value,
                WORK_INSTRUCTIONS
            ),
            Unusable::TooFew { counted } => write!(
                f,
                "fixed counter 0 (instructions retired) counted {counted} across {WORK_INSTRUCTIONS} instructions"
            ),
        }
    }
}

fn counter_name(i: u32) -> &'static str {
    FIXED_COUNTERS
        .iter()
        .find(|(c, _)| *c == i)
        .map_or("?", |(_, n)| n)
}

/// What the boot learnt of the counters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// Checked in ring 0: the two fixed counters moved by these amounts
    /// across the known work; CR4.PCE is set.
    On {
        instructions: u64,
        cycles: u64,
    },
    /// `pmc=pretend`: offered to ring 3 unchecked and never enabled.
    Pretend,
    Unusable(Unusable),
}

impl Status {
    /// Whether ring 3 is told it may read the counters.
    pub fn offered(self) -> bool {
        matches!(self, Status::On { .. } | Status::Pretend)
    }
}

/// The boot's verdict, set once by [`init`].
static STATUS: SetOnce<Status> = SetOnce::new();
/// Ring 3 may read the counters now: set by [`init`] when offered, cleared
/// for good by the first ring-3 RDPMC that faults ([`user_fault`]).
static USER_ON: AtomicBool = AtomicBool::new(false);

/// Checks the counters and, when they work (or `pmc=pretend`), offers them
/// to ring 3. Runs once, on the boot CPU, before any user program.
pub fn init(f: &Features, mode: Pmc) -> Status {
    let status = match mode {
        Pmc::Off => Status::Unusable(Unusable::Disabled),
        Pmc::Pretend => Status::Pretend,
        Pmc::Auto => match probe(f) {
            Ok((instructions, cycles)) => {
                set_pce(true);
                Status::On {
                    instructions,
                    cycles,
                }
            }
            Err(why) => Status::Unusable(why),
        },
    };
    STATUS.set(status);
    USER_ON.store(status.offered(), Ordering::Release);
    status
}

/// Whether ring 3 may read the fixed counters now (what `cpuinfo` reports).
pub fn user_counters_on() -> bool {
    USER_ON.load(Ordering::Acquire)
}

/// Programs fixed counters 0 and 1 and proves them in ring 0: each RDPMC
/// must not fault, and both must move across the known work. Returns how
/// far they moved (instructions, cycles).
fn probe(f: &Features) -> Result<(u64, u64), Unusable> {
    if f.perfmon_version == 0 {
        return Err(Unusable::NoPerfmon);
    }
    if f.perfmon_version < MIN_VERSION {
        return Err(Unusable::Version(f.perfmon_version));
    }
    if (f.perfmon_fixed as usize) < FIXED_COUNTERS.len() {
        return Err(Unusable::FixedCounters(f.perfmon_fixed));
    }
    program()?;
    let read = |counter: u32| {
        rdpmc_checked(RDPMC_FIXED | counter).map_err(|vector| Unusable::Rdpmc { counter, vector })
    };
    let before = [read(0)?, read(1)?];
    known_work();
    let after = [read(0)?, read(1)?];
    for (counter, _) in FIXED_COUNTERS {
        let i = counter as usize;
        if after[i] == before[i] {
            return Err(Unusable::Stuck {
                counter,
                value: before[i],
            });
        }
    }
    let instructions = after[0].wrapping_sub(before[0]);
    if instructions < WORK_INSTRUCTIONS {
        return Err(Unusable::TooFew {
            counted: instructions,
        });
    }
    Ok((instructions, after[1].wrapping_sub(before[1])))
}

/// Starts fixed counters 0 and 1 on this CPU, counting in rings 0 and 3.
fn program() -> Result<(), Unusable> {
    for (msr, value) in [
        (IA32_FIXED_CTR_CTRL, FIXED_0_AND_1_ALL_RINGS),
        (IA32_PERF_GLOBAL_CTRL, GLOBAL_FIXED_0_AND_1),
    ] {
        wrmsr_checked(msr, value).map_err(|vector| Unusable::Msr { msr, vector })?;
    }
    Ok(())
}

/// On an application processor: the counters and CR4.PCE are per CPU, so
/// where the boot CPU proved them (and they are still on), this CPU
/// programs its own and lets ring 3 read them. Should that fail, a ring-3
/// RDPMC here faults and [`user_fault`] turns the counters off.
pub fn init_ap() {
    if matches!(STATUS.get(), Some(Status::On { .. })) && user_counters_on() && program().is_ok() {
        set_pce(true);
    }
}

/// [`WORK_INSTRUCTIONS`] instructions: a `decl; jnz` loop.
#[inline(never)]
fn known_work() {
    // SAFETY: a register-only loop.
    unsafe {
        asm!("2: decl {n}", "jnz 2b", n = inout(reg) WORK_ITERATIONS => _,
             options(att_syntax, nomem, nostack));
    }
}

/// One instruction, `insn`, under the exception table, its other operands
/// `ops`: `faulted` (a `u32`) is 0 after it, or 1 when it faulted (the
/// table's entry resumes at label 2, which sets it). Expands to the `asm!`,
/// so it goes inside the caller's `unsafe` block.
macro_rules! under_extable {
    ($insn:literal, $faulted:ident, $($ops:tt)*) => {
        asm!(
            "xorl {f}, {f}",
            concat!("1: ", $insn),
            "jmp 3f",
            "2: movl $1, {f}",
            "3:",
            ".pushsection .extable, \"a\"",
            ".long 1b, 2b",
            ".popsection",
            f = out(reg) $faulted,
            $($ops)*,
            options(att_syntax, nomem, nostack)
        )
    };
}

/// `Err(vector)` of the last fixup when `under_extable!`'s flag says the
/// instruction faulted.
fn fixup_vector(faulted: u32) -> Result<(), u8> {
    if faulted != 0 {
        Err(last_fixup_vector())
    } else {
        Ok(())
    }
}

/// RDPMC in ring 0 under the exception table: the counter's value, or the
/// vector it raised (#GP for a counter the CPU lacks; QEMU's TCG raises #UD,
/// having no RDPMC at all).
pub fn rdpmc_checked(ecx: u32) -> Result<u64, u8> {
    let (lo, hi): (u32, u32);
    let faulted: u32;
    // SAFETY: RDPMC only reads a counter; if it faults, the exception table
    // entry resumes at label 2, which reports the fault.
    unsafe {
        under_extable!("rdpmc", faulted, in("ecx") ecx, out("eax") lo, out("edx") hi);
    }
    fixup_vector(faulted)?;
    Ok(((hi as u64) << 32) | lo as u64)
}

/// WRMSR under the exception table: Err(vector) if it faulted (#GP for an
/// MSR the CPU lacks or a value it refuses).
fn wrmsr_checked(msr: u32, value: u64) -> Result<(), u8> {
    let faulted: u32;
    // SAFETY: only the architectural counter-control MSRs are written (the
    // callers' constants), which start or stop counting and nothing else; a
    // fault resumes at label 2.
    unsafe {
        under_extable!("wrmsr", faulted,
            in("ecx") msr, in("eax") value as u32, in("edx") (value >> 32) as u32);
    }
    fixup_vector(faulted)
}

/// Sets or clears CR4.PCE on this CPU.
fn set_pce(on: bool) {
    // SAFETY: CR4.PCE only decides whether ring 3 may execute RDPMC.
    unsafe {
        if on {
            asm!("movl %cr4, {t}", "orl ${pce}, {t}", "movl {t}, %cr4",
                 t = out(reg) _, pce = const CR4_PCE, options(att_syntax, nostack));
        } else {
            asm!("movl %cr4, {t}", "andl ${keep}, {t}", "movl {t}, %cr4",
                 t = out(reg) _, keep = const !CR4_PCE, options(att_syntax, nostack));
        }
    }
}

/// A #GP or #UD from ring 3. If it was RDPMC and the boot offered the
/// counters to ring 3, the counters go off for the rest of the boot (the
/// first time, saying so), the program gets EDX:EAX = 0 and resumes after
/// the instruction: true. Anything else is an ordinary fault: false.
pub fn user_fault(f: &mut TrapFrame) -> bool {
    if !STATUS.get().is_some_and(|s| s.offered()) {
        return false;
    }
    if user_bytes(f.iret.eip) != Some(RDPMC_OPCODE) {
        return false;
    }
    if USER_ON.swap(false, Ordering::AcqRel) {
        set_pce(false);
        let why = UserFault {
            ecx: f.regs.ecx,
            vector: f.vector as u8,
            eip: f.iret.eip,
        };
        kprintln!("perf counters off: {why}; the run goes on without them");
        record!(kind::PERF, "status" => "off", "reason" => Text(why));
    }
    f.regs.eax = 0;
    f.regs.edx = 0;
    f.iret.eip += RDPMC_OPCODE.len() as u32;
    true
}

/// The two bytes at a ring-3 EIP, if they lie in mapped user pages.
fn user_bytes(eip: u32) -> Option<[u8; 2]> {
    let end = eip.checked_add(RDPMC_OPCODE.len() as u32)?;
    if eip < USER_BASE || end > USER_TOP {
        return None;
    }
    for byte in [eip, end - 1] {
        paging::flags(byte).filter(|f| f.contains(PRESENT | USER))?;
    }
    // SAFETY: both bytes are in present user pages of the current address
    // space (checked just above), which nothing unmaps while this CPU
    // handles the fault.
    Some(unsafe { core::ptr::read_unaligned(eip as *const [u8; 2]) })
}

/// "RDPMC (ECX 0x40000000) raised #GP in ring 3 at EIP 0x400028b4".
#[derive(Clone, Copy)]
struct UserFault {
    ecx: u32,
    vector: u8,
    eip: u32,
}

impl fmt::Display for UserFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "RDPMC (ECX {:#x}) raised {} in ring 3 at EIP {:#010x}",
            self.ecx,
            vector_name(self.vector),
            self.eip
        )
    }
}
