//! The boots under Bochs: a second x86 implementation, through GRUB.

use crate::cmd::Emulator;

use super::basics::bench_with_counters_or_reason;
use super::case::{Case, CASE};
use super::checks::BOCHS_TSC;
use super::faults::{kernel_pf_with_cr2, timed_out, triple_fault};
use super::matrix::matrix;
use super::smp::{locks_across_on, smp_check_on, smp_user_check};

pub(super) const BOCHS: &[Case] = &[
    // Bochs: the same kernel on a second x86 implementation, booted through
    // GRUB with no exit device, on real CPUs' CPUID (docs/machines.md says
    // where Bochs and QEMU differ). The agreement check (agreement.rs)
    // runs beside these.
    Case {
        // Two CPUs: the user threads run on both (the locks tests across
        // CPUs, a task ending everywhere); the other two models run one.
        name: "bochs p4_prescott_celeron_336 (SEP) on 2 CPUs: tests, the hostile suite, user threads on both CPUs",
        emulator: Emulator::Bochs,
        cpu: Some("p4_prescott_celeron_336"),
        cpus: 2,
        cmdline: "mode=test",
        timeout: BOCHS_TIMEOUT,
        check: |log, r| {
            matrix(log, r, "GenuineIntel", "15", ["ok", "ok", "ok", "unavailable"])?;
            smp_user_check(log, r, 2, 3)
        },
        ..CASE
    },
    Case {
        name: "bochs amd_k6_2_chomper (AMD SYSCALL in 32-bit mode, no SEP): tests and the hostile suite",
        emulator: Emulator::Bochs,
        cpu: Some("amd_k6_2_chomper"),
        cmdline: "mode=test",
        timeout: BOCHS_TIMEOUT,
        check: |log, r| matrix(log, r, "AuthenticAMD", "5", ["ok", "unavailable", "ok", "ok"]),
        ..CASE
    },
    Case {
        name: "bochs core2_penryn_t9600: tests and the hostile suite",
        emulator: Emulator::Bochs,
        cpu: Some("core2_penryn_t9600"),
        cmdline: "mode=test",
        timeout: BOCHS_TIMEOUT,
        check: |log, r| matrix(log, r, "GenuineIntel", "6", ["ok", "ok", "ok", "unavailable"]),
        ..CASE
    },
    // Bochs's Core 2 and Sandy Bridge models advertise architectural
    // counters (leaf 0xA v2 and v3) and do not implement them: the check in
    // ring 0 must find that out and the benchmark run without them.
    Case {
        name: "bochs core2_penryn_t9600: the benchmark runs whole; perf counters on, or n/a and why",
        emulator: Emulator::Bochs,
        cpu: Some("core2_penryn_t9600"),
        cmdline: "mode=run batches=4 batch_size=256",
        timeout: BOCHS_TIMEOUT,
        check: bench_with_counters_or_reason,
        ..CASE
    },
    Case {
        name: "bochs corei7_sandy_bridge_2600k: the benchmark runs whole; perf counters on, or n/a and why",
        emulator: Emulator::Bochs,
        cpu: Some("corei7_sandy_bridge_2600k"),
        cmdline: "mode=run batches=4 batch_size=256",
        timeout: BOCHS_TIMEOUT,
        check: bench_with_counters_or_reason,
        ..CASE
    },
    Case {
        name: "bochs SMP: 2 p4_prescott_celeron_336 CPUs from the MADT; benchmarks; a wake-up and a mutex hand-off across CPUs",
        emulator: Emulator::Bochs,
        cpu: Some("p4_prescott_celeron_336"),
        cpus: 2,
        cmdline: "mode=smp",
        timeout: BOCHS_TIMEOUT,
        check: |log, r| smp_check_on(log, r, "2", BOCHS_TSC, "Bochs does not model caches"),
        ..CASE
    },
    Case {
        // Bochs's CPUs take turns of a few instructions: a round trip that
        // could lose a wake-up does so here (216 timeouts, before it waited
        // for a sleeper); one lost now would hang the boot.
        name: "bochs locks on 2 CPUs (pool_align=128): the cross-CPU figures on both CPUs, no wake-up lost",
        emulator: Emulator::Bochs,
        cpu: Some("p4_prescott_celeron_336"),
        cpus: 2,
        cmdline: "mode=run prog=locks pool_align=128",
        timeout: BOCHS_TIMEOUT,
        check: |log, r| locks_across_on(log, r, 2, &["128"], BOCHS_TSC),
        ..CASE
    },
    Case {
        name: "bochs: a triple fault is told apart from a verdict (no exit device)",
        emulator: Emulator::Bochs,
        cmdline: "crash=triple",
        timeout: BOCHS_TIMEOUT,
        check: triple_fault,
        ..CASE
    },
    Case {
        name: "bochs: kernel #PF is reported with CR2, the verdict read from the serial line",
        emulator: Emulator::Bochs,
        cmdline: "crash=pf",
        timeout: BOCHS_TIMEOUT,
        check: kernel_pf_with_cr2,
        ..CASE
    },
    Case {
        name: "bochs: a guest with no verdict is stopped at the timeout",
        emulator: Emulator::Bochs,
        cmdline: "mode=run",
        // The BIOS alone takes longer than this.
        timeout: 1,
        check: |log, _| timed_out(log, "Bochs was killed"),
        ..CASE
    },
];

/// Seconds before a Bochs case is called hung: its boots take 15 to 40 s
/// on an idle 2-CPU machine (BIOS and GRUB included).
pub(super) const BOCHS_TIMEOUT: u64 = 240;
