//! What this CPU is and what it can do, from CPUID (Intel SDM Vol. 2A, CPUID;
//! AMD APM Vol. 3, Appendix E), read once at boot into [`Features`].

use core::arch::asm;

use raw_cpuid::{CpuId, CpuIdResult};

use spin::Once;

/// The Pentium Pro reports SEP but has no working SYSENTER: it needs family 6,
/// model 3, stepping 3 or later (SDM Vol. 2B, SYSENTER, "Operation" note).
const SEP_MIN_SIGNATURE: u32 = 0x633;
/// CPUID leaf 0x4000_0000: hypervisor vendor signature.
const LEAF_HYPERVISOR: u32 = 0x4000_0000;

bitflags::bitflags! {
    /// The CPUID feature bits the kernel looks at, each read from its leaf
    /// by `raw-cpuid` in [`detect`]. The `cpu` boot record names them in
    /// lower case (`tsc=true sep=true ...`).
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct Has: u32 {
        /// Leaf 1 EDX bit 4: RDTSC.
        const TSC = 1 << 0;
        /// SYSENTER/SYSEXIT usable: the SEP bit (leaf 1 EDX bit 11) and the
        /// Pentium Pro rule.
        const SEP = 1 << 1;
        /// Leaf 1 EDX bit 26.
        const SSE2 = 1 << 2;
        /// A local APIC (leaf 1 EDX bit 9).
        const APIC = 1 << 3;
        /// Physical address extension (leaf 1 EDX bit 6); reported, not used.
        const PAE = 1 << 4;
        /// Leaf 0x8000_0001 EDX bit 27.
        const RDTSCP = 1 << 5;
        /// Leaf 0x8000_0007 EDX bit 8.
        const INVARIANT_TSC = 1 << 6;
        /// SYSCALL/SYSRET bit in leaf 0x8000_0001 (usable in 32-bit mode on AMD only).
        const SYSCALL = 1 << 7;
        /// Leaf 1 ECX bit 31: running under a hypervisor.
        const HYPERVISOR = 1 << 8;
    }
}

#[derive(Clone, Copy, Debug)]
pub struct Features {
    pub has_cpuid: bool,
    /// "GenuineIntel", "AuthenticAMD", ... (12 bytes).
    pub vendor: [u8; 12],
    /// The brand string (48 bytes), empty where leaf 0x8000_0004 is missing.
    pub brand: [u8; 48],
    /// Leaf 1 EAX: stepping, model, family and their extensions.
    pub signature: u32,
    pub family: u32,
    pub model: u32,
    pub stepping: u32,
    /// The feature bits found (none without CPUID).
    pub has: Has,
    /// Leaf 0x4000_0000's signature, e.g. "TCGTCGTCGTCG" or "KVMKVMKVM".
    pub hypervisor_sig: [u8; 12],
    /// Architectural performance monitoring version (leaf 0xA), 0 = none.
    pub perfmon_version: u8,
    pub perfmon_counters: u8,
    /// Fixed-function counters (leaf 0xA EDX[4:0]).
    pub perfmon_fixed: u8,
}

/// The boot CPU's features, detected once.
static FEATURES: Once<Features> = Once::new();

/// True when EFLAGS.ID can be toggled: the CPU has CPUID (not an early 486).
fn cpuid_present() -> bool {
    let (before, after): (u32, u32);
    // SAFETY: flips EFLAGS.ID and reads it back; restores EFLAGS afterwards.
    unsafe {
        asm!(
            "pushfl",
            "popl {a}",
            "movl {a}, {b}",
            "xorl ${id}, {a}",
            "pushl {a}",
            "popfl",
            "pushfl",
            "popl {a}",
            "pushl {b}",
            "popfl",
            a = out(reg) after,
            b = out(reg) before,
            id = const abi::eflags::ID,
            options(att_syntax)
        );
    }
    (before ^ after) & abi::eflags::ID != 0
}

/// `cpuid` for raw-cpuid's reader (its own `CpuId::new` is gated on SSE).
fn cpuid(leaf: u32, sub: u32) -> CpuIdResult {
    let (a, b, c, d): (u32, u32, u32, u32);
    // SAFETY: only called after cpuid_present(); EBX is saved because LLVM
    // may use it on i686.
    unsafe {
        asm!(
            "movl %ebx, {b}",
            "cpuid",
            "xchgl %ebx, {b}",
            b = out(reg) b,
            inout("eax") leaf => a,
            inout("ecx") sub => c,
            out("edx") d,
            options(att_syntax, nomem, nostack, preserves_flags)
        );
    }
    CpuIdResult {
        eax: a,
        ebx: b,
        ecx: c,
        edx: d,
    }
}

fn copy_into(dst: &mut [u8], src: &[u8]) {
    let n = dst.len().min(src.len());
    dst[..n].copy_from_slice(&src[..n]);
}

pub fn detect() -> Features {
    let mut f = Features {
        has_cpuid: cpuid_present(),
        vendor: *b"no CPUID    ",
        brand: [0; 48],
        signature: 0,
        family: 4,
        model: 0,
        stepping: 0,
        has: Has::empty(),
        hypervisor_sig: [0; 12],
        perfmon_version: 0,
        perfmon_counters: 0,
        perfmon_fixed: 0,
    };
    if f.has_cpuid {
        let id = CpuId::with_cpuid_fn(cpuid);
        if let Some(v) = id.get_vendor_info() {
            copy_into(&mut f.vendor, v.as_str().as_bytes());
        }
        if let Some(b) = id.get_processor_brand_string() {
            copy_into(&mut f.brand, b.as_str().trim().as_bytes());
        }
        if let Some(fi) = id.get_feature_info() {
            f.signature = cpuid(1, 0).eax;
            f.family = fi.family_id() as u32;
            f.model = fi.model_id() as u32;
            f.stepping = fi.stepping_id() as u32;
            let pentium_pro_sep = f.family == 6 && (f.signature & 0xfff) < SEP_MIN_SIGNATURE;
            f.has.set(Has::TSC, fi.has_tsc());
            f.has
                .set(Has::SEP, fi.has_sysenter_sysexit() && !pentium_pro_sep);
            f.has.set(Has::SSE2, fi.has_sse2());
            f.has.set(Has::APIC, fi.has_apic());
            f.has.set(Has::PAE, fi.has_pae());
            f.has.set(Has::HYPERVISOR, fi.has_hypervisor());
        }
        if let Some(e) = id.get_extended_processor_and_feature_identifiers() {
            f.has.set(Has::SYSCALL, e.has_syscall_sysret());
            f.has.set(Has::RDTSCP, e.has_rdtscp());
        }
        if let Some(apm) = id.get_advanced_power_mgmt_info() {
            f.has.set(Has::INVARIANT_TSC, apm.has_invariant_tsc());
        }
        if let Some(pm) = id.get_performance_monitoring_info() {
            f.perfmon_version = pm.version_id();
            f.perfmon_counters = pm.number_of_counters();
            f.perfmon_fixed = pm.fixed_function_counters();
        }
        if f.has.contains(Has::HYPERVISOR) {
            let h = cpuid(LEAF_HYPERVISOR, 0);
            copy_into(&mut f.hypervisor_sig[0..4], &h.ebx.to_le_bytes());
            copy_into(&mut f.hypervisor_sig[4..8], &h.ecx.to_le_bytes());
            copy_into(&mut f.hypervisor_sig[8..12], &h.edx.to_le_bytes());
        }
    }
    assert!(!FEATURES.is_completed(), "cpu::detect ran twice");
    FEATURES.call_once(|| f);
    f
}

/// The features detected at boot.
pub fn features() -> &'static Features {
    FEATURES.get().expect("cpu::detect runs first")
}

/// A fixed byte field as text, up to its first NUL, trimmed.
pub fn text(b: &[u8]) -> &str {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    core::str::from_utf8(&b[..end]).unwrap_or("?").trim()
}

impl Features {
    pub fn vendor_str(&self) -> &str {
        text(&self.vendor)
    }
    pub fn brand_str(&self) -> &str {
        text(&self.brand)
    }
    pub fn hypervisor_str(&self) -> &str {
        if self.has.contains(Has::HYPERVISOR) {
            text(&self.hypervisor_sig)
        } else {
            "none"
        }
    }
    pub fn is_amd(&self) -> bool {
        &self.vendor == b"AuthenticAMD"
    }
}

/// CR2: the linear address of the last page fault.
/// RDTSC, not ordered against earlier instructions (a deadline or a
/// delay, not a measurement: the benchmarks fence theirs). Callers run
/// where the CPU has a TSC.
#[inline(always)]
pub fn rdtsc() -> u64 {
    let (lo, hi): (u32, u32);
    // SAFETY: RDTSC reads a counter; every caller runs where a TSC exists
    // (the APIC timer, the pacer and the AP start-up are set up only then).
    unsafe { asm!("rdtsc", out("eax") lo, out("edx") hi, options(nomem, nostack)) };
    ((hi as u64) << 32) | lo as u64
}

pub fn cr2() -> u32 {
    // SAFETY: reading CR2 has no side effect.
    unsafe { x86::controlregs::cr2() as u32 }
}

/// DR6.BS: the #DB was a single step (SDM Vol. 3A §17.2.3).
pub const DR6_SINGLE_STEP: u32 = 1 << 14;
/// DR6 with no condition recorded (its reserved bits read 1).
const DR6_CLEAR: u32 = 0xffff_0ff0;

/// DR6 as the last #DB left it, then cleared: the CPU sets its status bits
/// and never clears them, so a stale BS would make the next #DB (an
/// ICEBP, say) look like a single step.
pub fn take_dr6() -> u32 {
    let dr6: u32;
    // SAFETY: ring 0; DR6 only records why #DB happened.
    unsafe {
        asm!(
            "movl %dr6, {d}",
            "movl {c}, %dr6",
            d = out(reg) dr6,
            c = in(reg) DR6_CLEAR,
            options(att_syntax, nomem, nostack)
        )
    };
    dr6
}

/// CR0.EM: x87 instructions raise #NM (no FPU to use).
const CR0_EM: u32 = 1 << 2;
/// CPUID leaf 1 EDX bit 0: an x87 FPU on the chip.
const CPUID_1_EDX_FPU: u32 = 1 << 0;
/// The x87 control word FNINIT leaves: every exception masked, 64-bit
/// precision, round to nearest (SDM Vol. 1 §8.1.5).
pub const X87_CONTROL_INIT: u16 = 0x037f;

/// Whether ring 3 can use the x87 here: CPUID says there is an FPU and
/// CR0.EM does not send its instructions to #NM. Learnt once (neither
/// changes after boot): the context switch asks on every switch.
fn x87_usable() -> bool {
    use core::sync::atomic::{AtomicU8, Ordering};
    // 0: not asked yet, 1: no, 2: yes (every CPU finds the same).
    static USABLE: AtomicU8 = AtomicU8::new(0);
    match USABLE.load(Ordering::Relaxed) {
        0 => {}
        known => return known == 2,
    }
    let cr0: u32;
    // SAFETY: reading CR0 has no side effect.
    unsafe { asm!("movl %cr0, {}", out(reg) cr0, options(att_syntax, nomem, nostack)) };
    let u = cpuid_present() && cpuid(1, 0).edx & CPUID_1_EDX_FPU != 0 && cr0 & CR0_EM == 0;
    USABLE.store(1 + u as u8, Ordering::Relaxed);
    u
}

/// An x87 context as FNSAVE writes it in 32-bit protected mode (SDM Vol. 1
/// §8.1.10, Figure 8-9): control, status and tag words, the last
/// instruction and operand pointers, then the eight 80-bit registers
/// ST(0)..ST(7). One per user thread (`sched`).
#[derive(Clone, Copy, Debug)]
#[repr(C)]
pub struct X87State([u32; 27]);

impl X87State {
    /// The state a thread starts with: FNINIT's control word (every
    /// exception masked), an empty status, every register tagged empty,
    /// and every register's bits zero. FNINIT alone marks the registers
    /// empty but leaves their values, which FNSAVE or an MMX read would
    /// show the next task; FRSTOR of this image clears them too.
    pub const CLEAN: X87State = {
        let mut w = [0u32; 27];
        w[0] = X87_CONTROL_INIT as u32;
        w[2] = X87_TAGS_EMPTY;
        X87State(w)
    };
}

/// The tag word with all eight registers empty (0b11 each).
const X87_TAGS_EMPTY: u32 = 0xffff;

/// At a context switch: saves the running thread's x87 context into `save`
/// and loads `load`'s (each only when given, i.e. for user threads; kernel
/// code never uses the x87: the target is soft-float). CLTS first: every
/// hardware task switch (the #DB and #DF task gates, and the way back)
/// sets CR0.TS, which would make FNSAVE and FRSTOR raise #NM (SDM Vol. 3A
/// §2.5). No-op without a usable x87.
pub fn switch_x87(save: Option<&mut X87State>, load: Option<&X87State>) {
    if !x87_usable() {
        return;
    }
    // SAFETY: ring 0; an FPU exists and CR0.EM is clear, so with TS clear
    // FNSAVE (108 bytes out, then FNINIT's state) and FRSTOR (108 bytes
    // in) run; neither raises a pending x87 exception (FRSTOR's would be
    // taken by the thread's own next x87 instruction, in ring 3).
    unsafe {
        asm!("clts", options(nomem, nostack));
        if let Some(s) = save {
            asm!("fnsave ({})", in(reg) s as *mut X87State, options(att_syntax, nostack));
        }
        if let Some(l) = load {
            asm!("frstor ({})", in(reg) l as *const X87State, options(att_syntax, nostack, readonly));
        }
    }
}

/// A copy of the running thread's x87 context (for `fork`'s child): FNSAVE
/// reinitialises the x87, so the same image is loaded straight back.
pub fn copy_x87() -> X87State {
    let mut s = X87State::CLEAN;
    if x87_usable() {
        // SAFETY: as in switch_x87; the image FNSAVE wrote is loaded back,
        // so the running thread keeps its context.
        unsafe {
            asm!(
                "clts",
                "fnsave ({p})",
                "frstor ({p})",
                p = in(reg) &mut s as *mut X87State,
                options(att_syntax, nostack)
            )
        };
    }
    s
}

/// Puts the x87 back in its initial state with every register zero (FRSTOR
/// of [`X87State::CLEAN`]): between tasks, so a task's control word, tags,
/// pending exceptions and register values never meet the next task. No-op
/// without a usable x87.
pub fn reset_x87() {
    switch_x87(None, Some(&X87State::CLEAN));
}

/// A #NM from ring 3 because CR0.TS is set: a hardware task switch (a #DB
/// the debug task handled, say after a user's TF at an entry) set it, and
/// the user's x87 context is live here all the same (the kernel saves it
/// at every context switch, never lazily). Clears TS and says the
/// instruction may run again; false for any other #NM (no x87, CR0.EM).
pub fn device_not_available_from_user() -> bool {
    const CR0_TS: u32 = 1 << 3;
    let cr0: u32;
    // SAFETY: reading CR0 has no side effect.
    unsafe { asm!("movl %cr0, {}", out(reg) cr0, options(att_syntax, nomem, nostack)) };
    if !x87_usable() || cr0 & CR0_TS == 0 {
        return false;
    }
    // SAFETY: ring 0; clearing TS only lets x87 instructions run.
    unsafe { asm!("clts", options(nomem, nostack)) };
    true
}

/// The x87 control word, `None` without a usable x87 (for the tests).
pub fn x87_control() -> Option<u16> {
    if !x87_usable() {
        return None;
    }
    let mut cw: u16 = 0;
    // SAFETY: ring 0; an FPU exists, CR0.EM is clear and TS is cleared
    // (as in reset_x87); FNSTCW stores two bytes.
    unsafe { asm!("clts", "fnstcw ({})", in(reg) &mut cw, options(att_syntax, nostack)) };
    Some(cw)
}
