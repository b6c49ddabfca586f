//! The i386 testbed kernel.
//!
//! `kmain` is the boot sequence, one step per line; each step's module says
//! what it sets up and why.
#![no_std]
#![no_main]

mod arch;
mod bench;
mod boot;
mod console;
mod entry;
mod proc;
mod sync;
mod syscall;
mod task;
mod testing;
mod trap;
mod vm;

use abi::cmdline::{Crash, Mode, Options, Warning, KEYS};
use abi::exit;
use abi::report::kind;
use abi::Mechanism;
use core::sync::atomic::Ordering;

use arch::{cpu, exceptions, frames, gdt, idt, paging, pic, power};
use boot::info::{BootInfo, PhysMem};
use console::Hex;

/// Physical memory before and after paging: the kernel's identity map.
struct Identity;

impl PhysMem<'static> for Identity {
    fn bytes(&self, addr: u32, len: u32) -> Option<&'static [u8]> {
        let end = addr.checked_add(len)?;
        if addr < abi::layout::PAGE_SIZE || end > abi::layout::KERNEL_MAP_END {
            return None;
        }
        // SAFETY: inside the identity-mapped low memory the loader handed us.
        Some(unsafe { core::slice::from_raw_parts(addr as *const u8, len as usize) })
    }
}

/// Every cargo feature of the kernel, and whether this build has it.
const ALL_FEATURES: [(&str, bool); 5] = [
    (
        "exercise-sysexit-always",
        cfg!(feature = "exercise-sysexit-always"),
    ),
    (
        "exercise-trust-user-pointers",
        cfg!(feature = "exercise-trust-user-pointers"),
    ),
    (
        "exercise-sysenter-no-flags-reset",
        cfg!(feature = "exercise-sysenter-no-flags-reset"),
    ),
    ("test-late-ap", cfg!(feature = "test-late-ap")),
    ("test-gdt-order", cfg!(feature = "test-gdt-order")),
];

/// The enabled features, comma-separated ("none" without any), built at
/// compile time for the boot record.
const FEATURES: &str = match core::str::from_utf8(&FEATURE_LIST) {
    Ok(s) => s,
    Err(_) => panic!("feature names are ASCII"),
};
const FEATURE_LIST: [u8; feature_list_len()] = feature_list();
const NO_FEATURES: &str = "none";

const fn feature_list_len() -> usize {
    let (mut len, mut i) = (0, 0);
    while i < ALL_FEATURES.len() {
        if ALL_FEATURES[i].1 {
            len += ALL_FEATURES[i].0.len() + (len != 0) as usize;
        }
        i += 1;
    }
    if len == 0 {
        NO_FEATURES.len()
    } else {
        len
    }
}

const fn feature_list() -> [u8; feature_list_len()] {
    let mut out = [0u8; feature_list_len()];
    let mut at = 0;
    let mut i = 0;
    while i < ALL_FEATURES.len() {
        if ALL_FEATURES[i].1 {
            if at != 0 {
                out[at] = b',';
                at += 1;
            }
            let name = ALL_FEATURES[i].0.as_bytes();
            let mut k = 0;
            while k < name.len() {
                out[at] = name[k];
                at += 1;
                k += 1;
            }
        }
        i += 1;
    }
    if at == 0 {
        let none = NO_FEATURES.as_bytes();
        while at < none.len() {
            out[at] = none[at];
            at += 1;
        }
    }
    out
}

unsafe extern "C" {
    static __kernel_start: u8;
    static __kernel_end: u8;
}

#[unsafe(no_mangle)]
extern "C" fn kmain(magic: u32, info: u32) -> ! {
    console::init();
    kprintln!("i386 testbed kernel {}", boot::revision::text());

    // SAFETY: for the Multiboot 2 magic, EBX points at the loader's structure.
    let bi = match unsafe { BootInfo::parse(magic, info, &Identity) } {
        Ok(bi) => bi,
        Err(e) => {
            kprintln!("boot: cannot read the loader's information: {e:?}");
            power::exit(exit::FAILURE);
        }
    };
    let opts = Options::parse(bi.cmdline, &mut warn);
    record!(kind::BOOT, "loader" => bi.loader, "protocol" => bi.protocol.key(),
        "cmdline" => bi.cmdline, "mem_kib" => bi.memory_kib(),
        "modules" => bi.modules().len(), "rev" => boot::revision::text(), "features" => FEATURES);
    modules_dropped(&bi);

    let f = &cpu::detect();
    report_cpu(f);

    pic::init_masked();
    let stacks = boot::entry::stacks();
    let (gate, gate_floor) = entry::callgate::targets();
    // Every CPU's double-fault and debug tasks, each on its own stack.
    let handlers = core::array::from_fn(|cpu| {
        let task = |eip, debug| gdt::HandlerTask {
            eip,
            esp: stacks.handler(cpu, debug).1,
            cr3: paging::directory_address(),
        };
        gdt::HandlerTasks {
            df: task(exceptions::double_fault_entry(), false),
            db: task(exceptions::debug_entry(), true),
        }
    });
    gdt::init(
        stacks.kernel_top,
        &handlers,
        gate,
        gate_floor,
        &arch::smp::percpu_segments(),
    );
    exceptions::install();
    idt::set(
        arch::pit::VECTOR_TIMER,
        idt::Gate::new(arch::pit::irq0_address(), idt::GateKind::Interrupt, 0),
    );
    idt::set(
        pic::VECTOR_SPURIOUS,
        idt::Gate::new(pic::spurious_address(), idt::GateKind::Interrupt, 0),
    );
    let usable = entry::init(f, stacks.kernel_top);
    idt::load(0);
    arch::marker::announce_tables(idt::address(0), gdt::gdtr().1, gdt::tss_address(0));
    paging::init(&stacks, task::sched::stack_guards());
    arch::marker::check_window(&raw const __kernel_end as u32);
    task::sched::init();
    task::set_reset_above(syscall::reset_ring);
    proc::set_hooks(proc::Hooks {
        fork: proc::pipe::fork,
        exit: proc::pipe::exit,
        reset: proc::pipe::reset,
    });
    sync_pools(&opts);
    frames::init(
        &bi,
        (
            &raw const __kernel_start as u32,
            &raw const __kernel_end as u32,
        ),
    );
    vm::page::init(&bi);
    if vm::pmap::init(opts.pmap, bi.memory_end()).is_err() {
        kprintln!("vm: no memory for the kernel's page tables");
        power::exit(exit::FAILURE);
    }
    proc::init(opts.fork == abi::cmdline::Fork::Cow);
    let tsc_hz = arch::pit::measure_tsc_hz(f.has.contains(cpu::Has::TSC));
    let pmc = report_pmc(arch::pmu::init(f, opts.pmc));
    // Every CPU the firmware lists starts, in every mode: user threads run
    // on all of them.
    // The turn pacer runs on virtual time: only under icount (the model
    // clock boots with clock=icount too), never on parallel CPUs.
    let turn = if opts.clock == abi::cmdline::Clock::Icount && f.has.contains(cpu::Has::TSC) {
        opts.turn
    } else {
        0
    };
    arch::pacer::configure(turn, tsc_hz, arch::pit::TICK_HZ as u64);
    arch::pacer::set_park_poll(park_poll);
    let cpus = arch::smp::init(tsc_hz, f.has.contains(cpu::Has::APIC), ap_main);
    if cpus > 1 || opts.mode == Mode::Smp {
        kprintln!("smp: {cpus} CPU(s) started");
    }
    if cpus > 1 {
        if turn > 0 {
            arch::pacer::arm_this_cpu();
            arch::pacer::share(cpus);
            kprintln!(
                "smp: turns of {turn} instructions each (the pacer: CPUs interleave at this grain under icount)"
            );
        }
        record!(kind::TURN, "cpus" => cpus, "grain" => turn);
    }
    // What shapes every figure, read back from where it was applied, so a
    // table can refuse a row whose label the boot contradicts: the grain is
    // the one the pacer runs (0 on one CPU, or off icount).
    record!(kind::SETTINGS, "pmap" => vm::pmap::strategy().key(),
        "fork" => proc::fork_mode().key(), "cpus" => cpus,
        "turn" => if cpus > 1 { turn } else { 0 });
    {
        use abi::syscall::Feature;
        let mut features = Feature::empty();
        features.set(Feature::TSC, f.has.contains(cpu::Has::TSC));
        features.set(Feature::SSE2, f.has.contains(cpu::Has::SSE2));
        features.set(Feature::RDTSCP, f.has.contains(cpu::Has::RDTSCP));
        features.set(Feature::FIXED_PMC, pmc);
        syscall::set_sysinfo(abi::syscall::CpuInfo {
            mechanisms: usable,
            signature: f.signature,
            features: features.bits(),
            tsc_hz,
            batches: opts.batches,
            batch_size: opts.batch_size,
            clock: (opts.clock == abi::cmdline::Clock::Icount) as u32,
            entry: opts.entry,
            seed: opts.seed,
            fuzz_calls: opts.fuzz_calls,
            fuzz_threads: opts.fuzz_threads,
            emulated: abi::syscall::emulator_of(opts.accel),
            pool_align: opts.pool_align.unwrap_or(abi::syscall::POOL_ALIGN_EVERY),
            cpus: cpus as u32,
            fork_pages: opts.fork_pages,
            lmbench: opts.lmbench,
            fork_cow: (opts.fork == abi::cmdline::Fork::Cow) as u32,
        });
    }
    for m in Mechanism::ALL {
        match entry::unavailable_reason(m, f) {
            None => record!(kind::MECH, "name" => m.key(), "status" => "ok", "reason" => ""),
            Some(why) => {
                kprintln!("{}: unavailable: {}", m.title(), why);
                record!(kind::MECH, "name" => m.key(), "status" => "unavailable", "reason" => why)
            }
        }
    }

    if let Some(c) = opts.crash {
        crash(c);
    }
    let ok = match opts.mode {
        Mode::Test => testing::run_all(&bi, &opts),
        Mode::Run => run_program(&bi, &opts),
        Mode::Smp => bench::smp::run(
            tsc_hz,
            opts.clock == abi::cmdline::Clock::Icount,
            abi::syscall::emulator_of(opts.accel),
            opts.pool_align.and_then(sync::pool::Align::from_bytes),
        ),
    };
    if arch::pacer::grain() > 0 && cpus > 1 {
        report_pacer(cpus);
    }
    record!(kind::END, "status" => if ok { "success" } else { "failure" });
    power::exit(if ok { exit::SUCCESS } else { exit::FAILURE })
}

/// An application processor's life after the trampoline, as `kmain` is
/// the bootstrap processor's: its own CPU state, its entry MSRs, its local
/// timer, then the idle thread's loop: run this CPU's ready threads (user
/// threads included) and the benchmarks' commands, and otherwise wait for
/// an interrupt (the local timer, a reschedule IPI).
extern "C" fn ap_main(cpu: u32) -> ! {
    let cpu = cpu as usize;
    let stack_top = arch::smp::ap_init(cpu);
    entry::init_ap(stack_top);
    arch::pmu::init_ap();
    if arch::pacer::grain() > 0 {
        // Its scheduler ticks come from the pacer's interrupts.
        arch::pacer::arm_this_cpu();
    } else {
        arch::apic::start_timer(arch::pit::TICK_HZ as u32, arch::pit::tsc_hz());
    }
    // This context becomes the CPU's idle thread.
    let idle_ok = task::sched::idle::become_idle(cpu).is_ok();
    let me = arch::smp::this_cpu();
    if cfg!(feature = "test-late-ap") && cpu == 1 {
        // 200 ms late, past the 100 ms after which the BSP once gave the
        // next AP this one's index and stack (`arch::smp::start`).
        let wait = arch::pit::tsc_hz() / 5;
        let t0 = arch::cpu::rdtsc();
        while arch::cpu::rdtsc().wrapping_sub(t0) < wait {
            core::hint::spin_loop();
        }
    }
    me.started
        .store(arch::smp::start::RUNNING, Ordering::Release);
    loop {
        // SAFETY: IPIs (the TLB shootdown, reschedule) are taken while waiting.
        unsafe { core::arch::asm!("sti", options(nomem, nostack)) };
        let c = me.command.load(Ordering::Acquire);
        if c == 0 {
            // SAFETY: the scheduler runs with interrupts off.
            unsafe { core::arch::asm!("cli", options(nomem, nostack)) };
            // Only when a thread was made ready here: an idle CPU that the
            // pacer wakes each turn leaves the scheduler lock alone.
            if idle_ok && arch::smp::take_work() {
                task::sched::idle::idle_once();
            }
            if me.command.load(Ordering::Acquire) == 0
                && arch::smp::idle_state(cpu).wake.load(Ordering::Acquire) == 0
            {
                // Nothing to do: sleep until an interrupt.
                arch::smp::halt_idle();
            }
            continue;
        }
        // SAFETY: no IPI handler touches what the worker uses.
        unsafe { core::arch::asm!("cli", options(nomem, nostack)) };
        match c {
            arch::smp::command::RESET => task::reset_cpu_state(),
            arch::smp::command::STATE => me.arg.store(task::cpu_state_left(), Ordering::Release),
            _ => {
                if let Some(w) = arch::smp::worker() {
                    w(cpu, c, me.arg.load(Ordering::Relaxed));
                }
            }
        }
        me.command.store(0, Ordering::Relaxed);
        me.done.store(1, Ordering::Release);
    }
}

/// What a CPU the turn pacer parked runs between two `pause`s: it answers
/// TLB shootdowns, as a CPU spinning on a lock does. It holds no kernel
/// lock, since the pacer parks only from ring 3 or an idle wait
/// (docs/threads.md, "Turns"), and this asserts it at every park: a CPU
/// parked with the scheduler lock would stop every other CPU until its
/// next turn.
fn park_poll() {
    assert!(
        !task::sched::held_here(),
        "the turn pacer parked a CPU that holds the scheduler lock"
    );
    vm::pmap::shootdown::poll();
}

/// The turn pacer's cost in this boot (`kind::PACER`).
fn report_pacer(cpus: usize) {
    let (ints, parked) = arch::pacer::counts();
    use console::{List, Text};
    record!(kind::PACER, "interrupts" => Text(List(|| ints[..cpus].iter())),
        "parked" => Text(List(|| parked[..cpus].iter())));
}

fn warn(w: Warning) {
    match w {
        Warning::UnknownKey(k) => {
            kprint!("cmdline: unknown key '{k}' ignored; valid keys:");
            for key in KEYS {
                kprint!(" {key}");
            }
            kprintln!();
            record!(kind::WARN, "text" => "unknown key", "key" => k);
        }
        Warning::BadValue {
            key,
            value,
            expected,
        } => {
            kprintln!(
                "cmdline: {key}={value} is not valid ({key} takes {expected}); using the default"
            );
            record!(kind::WARN, "text" => "bad value", "key" => key, "value" => value);
        }
    }
}

/// Says so when the loader passed more modules than the kernel keeps: the
/// ones past `abi::layout::MAX_MODULES` are dropped, never run.
fn modules_dropped(bi: &BootInfo<'_>) {
    let dropped = bi.dropped_modules();
    if dropped == 0 {
        return;
    }
    let kept = boot::info::MAX_MODULES;
    kprintln!(
        "boot: the loader passed {} modules; the kernel keeps the first {kept}: {dropped} dropped",
        kept as u64 + dropped as u64
    );
    record!(kind::WARN, "text" => "boot modules dropped past the kernel's limit",
        "key" => "modules", "value" => dropped, "kept" => kept);
}

/// Lays out the sync-object pools as `pool_align=` says, and reports it.
fn sync_pools(opts: &Options) {
    use sync::pool::Align;
    use task::{sleepqueue, turnstile};
    // The pools are guarded by the scheduler lock, even at boot.
    let _g = task::sched::locked();
    let a = Align::from_bytes(opts.pool_align.unwrap_or(abi::cmdline::DEFAULT_POOL_ALIGN))
        .unwrap_or(Align::A128);
    sync::pool::set_boot_align(a);
    turnstile::set_align(a);
    sleepqueue::set_align(a);
    let (size, stride, per64, per128) = turnstile::layout();
    let (qsize, qstride, q64, q128) = sleepqueue::layout();
    record!(kind::POOL, "align" => a.key(), "ts_size" => size, "ts_stride" => stride,
        "ts_per64" => per64, "ts_per128" => per128, "sq_size" => qsize, "sq_stride" => qstride,
        "sq_per64" => q64, "sq_per128" => q128);
}

fn report_cpu(f: &cpu::Features) {
    use cpu::Has;
    let has = |h: Has| f.has.contains(h);
    kprintln!(
        "cpu: {} \"{}\" family {} model {} stepping {}, hypervisor {}",
        f.vendor_str(),
        f.brand_str(),
        f.family,
        f.model,
        f.stepping,
        f.hypervisor_str()
    );
    record!(kind::CPU, "vendor" => f.vendor_str(), "brand" => f.brand_str(),
        "family" => f.family, "model" => f.model, "stepping" => f.stepping,
        "signature" => Hex(f.signature), "hypervisor" => f.hypervisor_str(),
        "tsc" => has(Has::TSC), "sep" => has(Has::SEP), "sse2" => has(Has::SSE2),
        "rdtscp" => has(Has::RDTSCP), "invariant_tsc" => has(Has::INVARIANT_TSC),
        "syscall" => has(Has::SYSCALL), "pae" => has(Has::PAE), "apic" => has(Has::APIC),
        "perfmon" => f.perfmon_version, "counters" => f.perfmon_counters);
}

/// Says what the counter check found; true when ring 3 is offered the counters.
fn report_pmc(s: arch::pmu::Status) -> bool {
    use arch::pmu::Status;
    match s {
        Status::On {
            instructions,
            cycles,
        } => {
            kprintln!("perf counters on (instructions retired, core cycles): checked in ring 0, {instructions} instructions and {cycles} cycles across a known loop");
            record!(kind::PERF, "status" => "on", "reason" => "");
        }
        Status::Pretend => {
            kprintln!("perf counters pretended (pmc=pretend): offered to ring 3 unchecked and not enabled, so the first RDPMC faults");
            record!(kind::PERF, "status" => "on", "reason" => "pmc=pretend");
        }
        Status::Unusable(why) => {
            kprintln!("perf counters n/a: {why}");
            record!(kind::PERF, "status" => "n/a", "reason" => console::Text(why));
        }
    }
    s.offered()
}

/// Runs the program `prog` names; true when it exits with status 0.
fn run_program(bi: &BootInfo<'static>, opts: &Options) -> bool {
    // trace=<mechanism>: the user test program makes one traced call.
    let (prog, arg) = match opts.trace {
        Some(m) if !entry::is_usable(m) => {
            kprintln!("trace: {} is not available on this CPU", m.title());
            return false;
        }
        Some(m) if opts.prog == abi::cmdline::DEFAULT_PROG => {
            ("utest", abi::syscall::TRACE_ARG | m as u32)
        }
        Some(m) => (opts.prog, abi::syscall::TRACE_ARG | m as u32),
        None => (opts.prog, 0),
    };
    let Some(m) = bi.module(prog) else {
        kprint!("no program '{}' among the boot modules:", prog);
        for m in bi.modules() {
            kprint!(" {}", m.name);
        }
        match bi.dropped_modules() {
            0 => kprintln!(),
            n => kprintln!(
                " ({n} more dropped: the kernel keeps {})",
                boot::info::MAX_MODULES
            ),
        }
        return false;
    };
    match task::run(m, arg) {
        Ok(task::End::Exit(0)) => true,
        Ok(_) => false,
        Err(e) => {
            kprintln!("cannot load '{}': {e:?}", m.name);
            false
        }
    }
}

/// A deliberate kernel fault (`crash=`): each must produce its report.
fn crash(c: Crash) -> ! {
    kprintln!("crash: deliberate {} in the kernel", c.key());
    match c {
        Crash::Overflow => {
            #[allow(unconditional_recursion)]
            fn recurse(n: u32) -> u32 {
                let pad = core::hint::black_box([n; 64]);
                recurse(pad[1] + 1) + pad[0]
            }
            kprintln!("{}", recurse(0));
        }
        // SAFETY (the asm arms): each raises its exception on purpose; the
        // kernel-mode exception path reports it and exits.
        Crash::Breakpoint => unsafe { core::arch::asm!("int3") },
        Crash::InvalidOpcode => unsafe { core::arch::asm!("ud2") },
        Crash::DivideError => unsafe {
            core::arch::asm!("xorl %ecx, %ecx", "divl %ecx", out("eax") _, out("edx") _, out("ecx") _, options(att_syntax))
        },
        Crash::PageFault => {
            let unmapped = abi::layout::USER_TOP as *mut u32;
            // SAFETY: not safe at all: the page is unmapped, which is the point.
            unsafe { unmapped.write_volatile(0xdead) };
        }
        Crash::Panic => panic!("deliberate panic (crash=panic)"),
        Crash::TripleFault => {
            let empty: [u16; 3] = [0; 3];
            // SAFETY: not safe: with a zero-limit IDT every vector, #DF
            // included, faults, and the CPU shuts down. That is the point.
            unsafe { core::arch::asm!("lidt ({})", "int3", in(reg) &empty, options(att_syntax)) };
        }
    }
    kprintln!("crash: {} did not fault", c.key());
    power::exit(exit::FAILURE)
}

#[panic_handler]
fn panic(info: &core::panic::PanicInfo) -> ! {
    let (file, line) = info
        .location()
        .map(|l| (l.file(), l.line()))
        .unwrap_or(("?", 0));
    console::take_over();
    console::take_over_devices();
    kprintln!("kernel panic at {file}:{line}: {}", info.message());
    record!(kind::EXCEPTION, "vector" => 255u32, "name" => "panic", "mode" => "kernel",
        "file" => file, "line" => line);
    power::exit(exit::PANIC)
}
