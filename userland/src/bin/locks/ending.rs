// A task that ends while its threads run on other CPUs (arguments 2
// and 3), and one that single-steps on every CPU at once (4). Included
// into main.rs.

// ---- a task that ends while its threads run elsewhere ------------------------

/// Threads that have started on their CPU.
static RUNNING: AtomicU32 = AtomicU32::new(0);

/// Spins in ring 3 for good (the task's end must stop it).
fn spinner(_: u32) {
    RUNNING.fetch_add(1, SeqCst);
    let mut n = 0u32;
    loop {
        n = core::hint::black_box(n.wrapping_add(1));
    }
}

/// Makes system calls for good (stopped in or between them).
fn caller(_: u32) {
    RUNNING.fetch_add(1, SeqCst);
    loop {
        let _ = threads::gettid();
        threads::yield_now();
    }
}

/// Faults once every thread runs.
fn faulter(want: u32) {
    RUNNING.fetch_add(1, SeqCst);
    while RUNNING.load(SeqCst) < want {
        core::hint::spin_loop();
    }
    // SAFETY: not safe: #UD on purpose, which ends the task.
    unsafe { core::arch::asm!("ud2") };
}

/// Once `want` threads wait here: sets TF and enters the kernel through
/// the call gate, which keeps TF, so the single-step trap comes at the
/// gate's first instruction in ring 0 (SDM Vol. 3A §17.3.1.4); the kernel
/// resumes it there and gives TF back, and the next trap, in ring 3, ends
/// the task.
fn stepper(want: u32) {
    RUNNING.fetch_add(1, SeqCst);
    while RUNNING.load(SeqCst) < want {
        core::hint::spin_loop();
    }
    // SAFETY: not safe to go on from: the trap ends the task (on whichever
    // CPU comes first); the registers are the call gate's ABI.
    unsafe {
        core::arch::asm!(
            "pushfl",
            "orl ${tf}, (%esp)",
            "popfl",
            "lcall ${gate}, $0",
            "nop",
            tf = const userland::abi::eflags::TF,
            gate = const userland::abi::layout::selector::CALL_GATE,
            inout("eax") nr::GETPID => _,
            options(att_syntax)
        )
    };
    // Not reached: the task has ended.
    loop {
        core::hint::spin_loop();
    }
}

/// A stepper on every CPU, this thread the one on CPU 0.
fn step_everywhere() -> i32 {
    let n = cpus();
    for c in 1..n {
        if threads::spawn_on(stepper, n, 16, c).is_err() {
            println!("locks: no thread on CPU {c}");
            return 1;
        }
    }
    println!("locks: a thread on each of {n} CPUs single-steps into the kernel at once");
    stepper(n);
    1
}

/// A spinner and a caller on every other CPU; then this thread exits the
/// task (or, with `fault`, the last CPU's extra thread executes `ud2`).
/// The kernel must stop them all and go on.
fn end_elsewhere(fault: bool) -> i32 {
    let n = cpus();
    let mut want = 0;
    for c in 1..n {
        want += threads::spawn_on(spinner, 0, 16, c).is_ok() as u32;
        want += threads::spawn_on(caller, 0, 16, c).is_ok() as u32;
    }
    if fault {
        want += 1;
        let _ = threads::spawn_on(faulter, want, 16, n - 1);
    }
    let mut rounds = 0;
    while RUNNING.load(SeqCst) < want && rounds < 10_000 {
        threads::sleep(1);
        rounds += 1;
    }
    println!(
        "locks: {} of {want} threads run on CPUs 1..{n}; the task ends {}",
        RUNNING.load(SeqCst),
        if fault {
            "by a fault there"
        } else {
            "by exit(0) here"
        }
    );
    if fault {
        // Wait here for the fault to end the task.
        loop {
            threads::sleep(1);
        }
    }
    sys::call(Mechanism::Int80, nr::EXIT, [0; 6]);
    1
}
