//! System-call numbers, errno values, file descriptors and the entry mechanisms.
//!
//! One ABI for every mechanism: the number in EAX, arguments in EBX, ECX, EDX,
//! ESI, EDI, EBP, the result in EAX (a negative errno on failure). How each
//! mechanism carries the registers it consumes is documented on [`Mechanism`].

/// System-call numbers. Dense from 0 so the dispatcher indexes a table.
pub mod nr {
    /// Does nothing and returns 0: the round trip itself.
    pub const NULL: u32 = 0;
    /// `exit(status)`: ends the calling task.
    pub const EXIT: u32 = 1;
    /// `write(fd, buf, len)` → bytes written.
    pub const WRITE: u32 = 2;
    /// `read(fd, buf, len)` → bytes read.
    pub const READ: u32 = 3;
    /// `getpid()` → the task id.
    pub const GETPID: u32 = 4;
    /// `geteuid()` → the effective user id from the task's credential.
    pub const GETEUID: u32 = 5;
    /// `yield()`: give up the CPU (returns at once while there is one task).
    pub const YIELD: u32 = 6;
    /// `cpuinfo(buf, len)`: copies a [`crate::syscall::CpuInfo`] to user memory.
    pub const CPUINFO: u32 = 7;
    /// `entry_floor(mechanism, on)`: point an MSR-based mechanism (sysenter,
    /// syscall) at its floor entry (`on` = 1) or back at the full one. The
    /// floor does no work, so the call that turns it off must come through
    /// another mechanism. Int 0x80 and the call gate have a floor of their
    /// own (`layout::VECTOR_SYSCALL_FLOOR`, `selector::CALL_GATE_FLOOR`).
    pub const ENTRY_FLOOR: u32 = 8;
    /// `argsum(a1..a6)` → `a1 + 2·a2 + 3·a3 + 4·a4 + 5·a5 + 6·a6` (wrapping):
    /// proves that all six arguments arrive, whichever mechanism carried them.
    pub const ARGSUM: u32 = 9;
    /// `trace()` → the pid, like getpid, after the kernel has printed how
    /// this call arrived: the entry it came through, what the CPU did, the
    /// frame the dispatcher sees, and the way back it will take.
    pub const TRACE: u32 = 10;
    /// `sleep(ticks)`: block for at least `ticks` timer ticks (1 ms each).
    pub const SLEEP: u32 = 11;
    /// `thread_create(entry, stack_top, arg, priority, cpu)` → tid, or
    /// -EAGAIN when no thread (or turnstile, or sleepqueue) is left in the
    /// pools, -EINVAL for a CPU that does not run. `cpu` is a CPU index, or
    /// [`super::CPU_ANY`]: the least loaded CPU.
    pub const THREAD_CREATE: u32 = 12;
    /// `thread_exit(clear)`: ends the calling thread (the task ends with its
    /// last). When `clear` is not 0, the kernel stores 0 at that user word
    /// once the thread no longer runs on its user stack, so the stack can
    /// be reused (Linux's clear-child-tid).
    pub const THREAD_EXIT: u32 = 13;
    /// `umtx_lock(addr)`: the slow path of a user mutex (a word: 0 free,
    /// else the owner's tid, with `UMTX_CONTESTED` when others wait). Blocks
    /// on a turnstile; -EDEADLK if the caller owns it.
    pub const UMTX_LOCK: u32 = 14;
    /// `umtx_unlock(addr)`: hands the mutex to the most urgent waiter.
    pub const UMTX_UNLOCK: u32 = 15;
    /// `sleep_on(chan, timeout_ticks)` → 0 when woken, -ETIMEDOUT (0 = no timeout).
    pub const SLEEP_ON: u32 = 16;
    /// `wakeup(chan, all)` → how many threads were woken.
    pub const WAKEUP: u32 = 17;
    /// `pool_align(bytes)`: 128, 64 or 0 (packed); -EBUSY while other
    /// threads exist. Prints the pool layout.
    pub const POOL_ALIGN: u32 = 18;
    /// `gettid()`.
    pub const GETTID: u32 = 19;
    /// `getprio(tid)` → the thread's effective priority (lent ones included).
    pub const GETPRIO: u32 = 20;
    /// `lookup_bench(n)`: `n` turnstile-chain lookups in the kernel, for
    /// timing one lookup; -EINVAL for `n` above [`super::LOOKUP_BENCH_MAX`]
    /// (the loop runs with interrupts masked and the scheduler lock held).
    pub const LOOKUP_BENCH: u32 = 21;
    /// `record(buf, len)`: one report record from ring 3, its body
    /// (`kind key=value ...`, no marker, no newline) at `buf`. The kernel
    /// checks it (`abi::report::check_user_record`: -EINVAL, or -EFAULT for
    /// the buffer) and prints it tagged with the program that made it:
    /// `@@tb1 kind prog=<name> pid=<pid> key=value ...`. The only way a
    /// user program's figures reach the report: ring 3's console writes
    /// cannot hold the marker (the kernel escapes every `@` in them).
    pub const RECORD: u32 = 22;
    /// `cpu()` → the index of the CPU the calling thread runs on (0 is the
    /// bootstrap processor).
    pub const CPU: u32 = 23;
    /// `fork()` → the child's pid in the parent, 0 in the child. Only the
    /// calling thread is copied (POSIX); the child's address space is a copy
    /// of the parent's (eager, or copy-on-write under `fork=cow`).
    /// `-EAGAIN` when the process table, the threads or memory run out.
    pub const FORK: u32 = 24;
    /// `waitpid(pid or -1, &status or 0, flags)` → the pid of a child that
    /// ended (its status stored, see [`super::wait`]), 0 with `WNOHANG`
    /// while the children live, `-ECHILD` without such a child, `-EFAULT`
    /// for a bad status pointer (the child is then not reaped).
    pub const WAITPID: u32 = 25;
    /// `getppid()` → the parent's pid (1's children keep 1; pid 1 gets 0).
    pub const GETPPID: u32 = 26;
    /// `sbrk(increment)` → the old break: grows (or shrinks) the heap at
    /// [`crate::layout::USER_HEAP_BASE`]; new pages are demand-zero.
    /// `-ENOMEM` past [`crate::layout::USER_HEAP_MAX`] or below its base.
    pub const SBRK: u32 = 27;
    /// `pipe(fds)`: makes a pipe and stores two `i32` at `fds`: the read
    /// end, then the write end (descriptors from [`super::fd::FIRST_PIPE`]).
    /// `-EMFILE` when the process's table is full, `-ENFILE` when the
    /// kernel's pool of pipes is, `-EFAULT` for a bad `fds`.
    pub const PIPE: u32 = 28;
    /// `close(fd)` → 0; `-EBADF` for a descriptor the process does not
    /// have open (the fixed descriptors 0..=4 cannot be closed).
    pub const CLOSE: u32 = 29;
    /// `dup2(old, new)` → `new`: `new` becomes a copy of the open pipe end
    /// `old` (closed first if open). `-EBADF` for a bad `old` or a `new`
    /// outside the pipe descriptors.
    pub const DUP2: u32 = 30;
    /// `kill(pid, sig)` → 0: posts signal `sig` ([`super::sig`]) to process
    /// `pid`; `sig` 0 only checks that it exists. `-ESRCH` for no such
    /// process, `-EINVAL` for a bad signal or a `pid` of 0 or below (there
    /// are no process groups).
    pub const KILL: u32 = 31;
    /// `sigaction(sig, handler, old)` → 0: installs `handler` for `sig`
    /// ([`super::sig::SIG_DFL`], [`super::sig::SIG_IGN`], or a user
    /// address called as `extern "C" fn(sig: u32)`), storing the previous
    /// one as a `u32` at `old` unless it is 0. `-EINVAL` for a bad signal
    /// or for `SIGKILL`, `-EFAULT` for a bad `old`.
    pub const SIGACTION: u32 = 32;
    /// `sigreturn()`: the end of a handler. Restores the context saved in
    /// the signal frame at the caller's stack pointer (the kernel's
    /// trampoline calls it); a frame that does not check out ends the
    /// process as if by `SIGSEGV`.
    pub const SIGRETURN: u32 = 33;
    /// One past the last number: anything `>= COUNT` returns `-ENOSYS`.
    pub const COUNT: u32 = 34;

    /// The name of a call, for reports.
    pub fn name(n: u32) -> &'static str {
        match n {
            NULL => "null",
            EXIT => "exit",
            WRITE => "write",
            READ => "read",
            GETPID => "getpid",
            GETEUID => "geteuid",
            YIELD => "yield",
            CPUINFO => "cpuinfo",
            ENTRY_FLOOR => "entry_floor",
            ARGSUM => "argsum",
            TRACE => "trace",
            SLEEP => "sleep",
            THREAD_CREATE => "thread_create",
            THREAD_EXIT => "thread_exit",
            UMTX_LOCK => "umtx_lock",
            UMTX_UNLOCK => "umtx_unlock",
            SLEEP_ON => "sleep_on",
            WAKEUP => "wakeup",
            POOL_ALIGN => "pool_align",
            GETTID => "gettid",
            GETPRIO => "getprio",
            LOOKUP_BENCH => "lookup_bench",
            RECORD => "record",
            CPU => "cpu",
            FORK => "fork",
            WAITPID => "waitpid",
            GETPPID => "getppid",
            SBRK => "sbrk",
            PIPE => "pipe",
            CLOSE => "close",
            DUP2 => "dup2",
            KILL => "kill",
            SIGACTION => "sigaction",
            SIGRETURN => "sigreturn",
            _ => "unknown",
        }
    }
}

/// Error numbers, returned negated in EAX. Values follow Linux i386.
pub mod errno {
    pub const EPERM: i32 = 1;
    pub const EBADF: i32 = 9;
    pub const EAGAIN: i32 = 11;
    pub const EFAULT: i32 = 14;
    pub const EINVAL: i32 = 22;
    pub const EDEADLK: i32 = 35;
    pub const ENOSYS: i32 = 38;
    pub const EBUSY: i32 = 16;
    /// No such thread.
    pub const ESRCH: i32 = 3;
    pub const ETIMEDOUT: i32 = 110;
    /// No child to wait for.
    pub const ECHILD: i32 = 10;
    pub const ENOMEM: i32 = 12;
    /// A system call ended early by a signal whose handler ran.
    pub const EINTR: i32 = 4;
    /// The process's descriptor table is full.
    pub const EMFILE: i32 = 24;
    /// The kernel's table of open files (here: pipes) is full.
    pub const ENFILE: i32 = 23;
    /// A write to a pipe nobody reads any more (`SIGPIPE` comes with it).
    pub const EPIPE: i32 = 32;

    pub fn name(e: i32) -> &'static str {
        match e {
            EPERM => "EPERM",
            EBADF => "EBADF",
            EAGAIN => "EAGAIN",
            EFAULT => "EFAULT",
            EINVAL => "EINVAL",
            EDEADLK => "EDEADLK",
            ENOSYS => "ENOSYS",
            EBUSY => "EBUSY",
            ESRCH => "ESRCH",
            ETIMEDOUT => "ETIMEDOUT",
            ECHILD => "ECHILD",
            ENOMEM => "ENOMEM",
            EINTR => "EINTR",
            EMFILE => "EMFILE",
            ENFILE => "ENFILE",
            EPIPE => "EPIPE",
            _ => "E?",
        }
    }
}

/// `waitpid`'s flags and the status word it stores, in POSIX's encoding:
/// the low 7 bits 0 for an exit (its code in bits 8-15); a signal number
/// (1..[`super::sig::NSIG`], nothing else set) for a process a signal
/// ended; otherwise what else ended it: a CPU exception (its vector + 1,
/// with [`FAULTED`] set, so no signal number is mistaken for a vector) or
/// a bad stack on a fast entry ([`BAD_STACK`]).
pub mod wait {
    /// Return 0 at once when no child has ended yet.
    pub const WNOHANG: u32 = 1;
    /// The termination code of a process whose fast entry found no valid
    /// user stack (`sysenter` or `syscall`).
    pub const BAD_STACK: u32 = 0x7e;
    /// Marks a status that a CPU exception ended (above POSIX's 16 bits).
    pub const FAULTED: u32 = 1 << 16;

    pub const fn exited(code: i32) -> u32 {
        ((code as u32) & 0xff) << 8
    }
    pub const fn faulted(vector: u8) -> u32 {
        FAULTED | ((vector as u32 & 0x1f) + 1)
    }
    /// A process ended by signal `sig` (POSIX's `WIFSIGNALED`).
    pub const fn signalled(sig: u32) -> u32 {
        sig & 0x7f
    }
    /// `Some(code)` for an exit.
    pub const fn exit_code(status: u32) -> Option<i32> {
        if status & 0x7f == 0 {
            Some(((status >> 8) & 0xff) as i32)
        } else {
            None
        }
    }
    /// `Some(vector)` for a process a CPU exception ended.
    pub const fn fault_vector(status: u32) -> Option<u8> {
        if status & FAULTED != 0 && status & 0x7f != 0 {
            Some(((status & 0x7f) - 1) as u8)
        } else {
            None
        }
    }
    /// `Some(sig)` for a process a signal ended (POSIX's `WTERMSIG`).
    pub const fn term_signal(status: u32) -> Option<u32> {
        let sig = status & 0x7f;
        if status & !0x7f == 0 && sig != 0 && sig < super::sig::NSIG {
            Some(sig)
        } else {
            None
        }
    }
}

/// Signal numbers (Linux i386's) and `sigaction`'s two special handlers.
/// Every signal but [`SIGCHLD`] ends the process by default (`waitpid`
/// then says [`wait::signalled`]); `SIGCHLD` is ignored by default.
/// [`SIGKILL`] can be neither caught nor ignored.
pub mod sig {
    pub const SIGHUP: u32 = 1;
    pub const SIGINT: u32 = 2;
    pub const SIGQUIT: u32 = 3;
    pub const SIGILL: u32 = 4;
    pub const SIGABRT: u32 = 6;
    pub const SIGKILL: u32 = 9;
    pub const SIGUSR1: u32 = 10;
    /// What a bad `sigreturn` frame ends the process with.
    pub const SIGSEGV: u32 = 11;
    pub const SIGUSR2: u32 = 12;
    pub const SIGPIPE: u32 = 13;
    pub const SIGALRM: u32 = 14;
    pub const SIGTERM: u32 = 15;
    pub const SIGCHLD: u32 = 17;
    /// One past the last signal number: signals are `1..NSIG`.
    pub const NSIG: u32 = 32;

    /// `sigaction`'s handler: the default action.
    pub const SIG_DFL: u32 = 0;
    /// `sigaction`'s handler: discard the signal.
    pub const SIG_IGN: u32 = 1;

    /// Whether the default action of `sig` is to ignore it.
    pub const fn ignored_by_default(sig: u32) -> bool {
        sig == SIGCHLD
    }

    /// What the kernel pushes on the user stack to deliver a signal,
    /// lowest address first: the handler finds its return address and its
    /// argument where a cdecl call leaves them, and returns into `code`,
    /// which steps over `sig` and calls `sigreturn` with ESP at `saved`.
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
    #[repr(C)]
    pub struct Frame {
        /// The handler's return address: `&code`.
        pub ret: u32,
        /// The handler's argument: the signal number.
        pub sig: u32,
        pub saved: Saved,
        /// The trampoline ([`TRAMPOLINE`]).
        pub code: [u8; 12],
    }

    /// The context a signal interrupted, as `sigreturn` reads it back from
    /// the caller's stack pointer. CS and SS are not in it: `sigreturn`
    /// always returns to the user selectors. EFLAGS is masked to what ring
    /// 3 may set ([`crate::eflags::USER_SETTABLE`] plus IF, which is set).
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
    #[repr(C)]
    pub struct Saved {
        /// [`FRAME_MAGIC`]: anything else ends the process (`SIGSEGV`).
        pub magic: u32,
        pub eip: u32,
        pub esp: u32,
        pub eflags: u32,
        pub eax: u32,
        pub ecx: u32,
        pub edx: u32,
        pub ebx: u32,
        pub ebp: u32,
        pub esi: u32,
        pub edi: u32,
    }

    /// [`Saved::magic`].
    pub const FRAME_MAGIC: u32 = 0x5349_4746;

    /// The trampoline's bytes: `addl $4, %esp` (past `sig`), `movl
    /// $SIGRETURN, %eax`, `int $0x80`, then `ud2` (never reached).
    pub const TRAMPOLINE: [u8; 12] = [
        0x83,
        0xc4,
        0x04,
        0xb8,
        super::nr::SIGRETURN as u8,
        0,
        0,
        0,
        0xcd,
        super::super::layout::VECTOR_SYSCALL,
        0x0f,
        0x0b,
    ];

    pub fn name(sig: u32) -> &'static str {
        match sig {
            SIGHUP => "SIGHUP",
            SIGINT => "SIGINT",
            SIGQUIT => "SIGQUIT",
            SIGILL => "SIGILL",
            SIGABRT => "SIGABRT",
            SIGKILL => "SIGKILL",
            SIGUSR1 => "SIGUSR1",
            SIGSEGV => "SIGSEGV",
            SIGUSR2 => "SIGUSR2",
            SIGPIPE => "SIGPIPE",
            SIGALRM => "SIGALRM",
            SIGTERM => "SIGTERM",
            SIGCHLD => "SIGCHLD",
            _ => "SIG?",
        }
    }
}

/// The `procs` program's argument.
pub mod procs_arg {
    /// With this bit, the argument's other bits are a number of bare
    /// fork/exit/wait rounds to run (the leak test), not the cases.
    pub const ROUNDS: u32 = 1 << 31;
    /// What a forked child of the cases prints before its fault, followed
    /// by ` pid P tid T`: the host finds the same two numbers on the
    /// child's `check` record named [`CHILD_RECORD`] and on the kernel's
    /// line for the child's fault.
    pub const CHILD_SAYS: &str = "procs: the forked child is";
    /// That child's `check` record's name.
    pub const CHILD_RECORD: &str = "forked child";
    /// The cases that need a second CPU: on one they are skipped, each
    /// with a `check` record whose result is `skip`.
    pub const ACROSS_CASES: [&str; 2] = [
        "pipe: a reader blocked on the other CPU is woken by a write",
        "pipe: 1,000,000 bytes from CPU 0 to CPU 1, none lost or reordered",
    ];
}

/// Processes the kernel holds at once (zombies included): past it, `fork`
/// fails with `-EAGAIN`.
pub const MAX_PROCS: usize = 16;

/// File descriptors every task starts with.
pub mod fd {
    /// Reads return 0 (end of file).
    pub const STDIN: u32 = 0;
    /// The console (serial + VGA).
    pub const STDOUT: u32 = 1;
    pub const STDERR: u32 = 2;
    /// Swallows writes, reads return 0: the cheapest real `write`.
    pub const NULL: u32 = 3;
    /// A kernel ring buffer of [`RING_SIZE`] bytes: writes append, reads consume.
    pub const RING: u32 = 4;
    pub const RING_SIZE: usize = 4096;
    /// Pipe ends get descriptors from here (`pipe`, `dup2`), per process.
    pub const FIRST_PIPE: u32 = 5;
    /// How many pipe descriptors a process may hold: `FIRST_PIPE..FIRST_PIPE + PIPE_FDS`.
    pub const PIPE_FDS: u32 = 16;
    /// A pipe's buffer: one page.
    pub const PIPE_SIZE: usize = 4096;
    /// Writes of at most this many bytes to a pipe are atomic: they wait
    /// until they fit whole, so they are never interleaved with another
    /// writer's. Longer ones go in piece by piece as room appears (POSIX's
    /// `PIPE_BUF`; Linux's value).
    pub const PIPE_BUF: usize = PIPE_SIZE;
}

/// Pipes the kernel holds at once (all processes): past it, `pipe` fails
/// with `-ENFILE`.
pub const MAX_PIPES: usize = 16;

/// The argument (EAX at entry) that puts the user test program in trace
/// mode; the low bits name the mechanism (`Mechanism as u32`).
pub const TRACE_ARG: u32 = 0x7472_0000;
pub const TRACE_ARG_MASK: u32 = 0xffff_0000;

/// The most lookups one `lookup_bench` call makes: about 40 instructions
/// each, so one call keeps interrupts masked for a few million
/// instructions at most (a few milliseconds on the oldest CPUs here).
pub const LOOKUP_BENCH_MAX: u32 = 1 << 16;

/// Threads the kernel can hold at once (the boot thread included).
pub const MAX_THREADS: usize = 16;
/// Priorities: 0 is the most urgent, 31 the least. User threads start at
/// `PRIO_USER` unless `thread_create` asks otherwise.
pub const PRIO_MAX: u32 = 31;
pub const PRIO_USER: u32 = 16;
/// The `locks` program's argument (EAX at entry): what it runs.
pub mod locks_arg {
    /// The benchmarks (any other value too).
    pub const BENCHES: u32 = 0;
    /// The tests: priority propagation, wake-up order, stresses, exhaustion,
    /// EDEADLK; with more than one CPU the same across CPUs.
    pub const TESTS: u32 = 1;
    /// A thread spins in ring 3 on every other CPU, another makes system
    /// calls there, and the first thread calls `exit(0)`: the task must end
    /// everywhere.
    pub const END_EXIT: u32 = 2;
    /// As `END_EXIT`, but the task ends by a thread on the last CPU
    /// executing `ud2` (#UD) while the others run.
    pub const END_FAULT: u32 = 3;
    /// A thread on every CPU sets TF and enters the kernel through the
    /// call gate, all at once: each CPU takes a #DB in ring 0 at the
    /// gate's entry (resumed) and then one in ring 3 (which ends the task),
    /// each CPU through its own debug task.
    pub const END_STEP: u32 = 4;
    /// The tests' checks across CPUs, as the `check` records name them
    /// with result `skip` on one CPU (on several each group runs under
    /// names of its own, which say the CPUs).
    pub const ACROSS_SKIPPED: [&str; 5] = [
        "across CPUs (owner on 1, waiter on 0): priority lending and hand-off",
        "across CPUs (owner on 0, waiter on 1): priority lending and hand-off",
        "across CPUs: locked increments from two threads on every CPU",
        "across CPUs: sleep/wakeup round trips between CPU 0 and CPU 1 all complete",
        "across CPUs: every usable mechanism enters and returns on every CPU",
    ];
}

/// `thread_create`'s CPU argument for "any": the kernel spreads threads
/// over the running CPUs (the one with the fewest live user threads).
pub const CPU_ANY: u32 = u32::MAX;
/// The bit a user mutex word carries while threads wait in the kernel.
pub const UMTX_CONTESTED: u32 = 1 << 31;

/// The user credential every task starts with (reported by `geteuid`).
pub const DEFAULT_EUID: u32 = 1000;

/// The ways ring 3 can enter ring 0. Each has a *full* entry (into the
/// dispatcher) and a *floor* entry (the cheapest legal round trip).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum Mechanism {
    /// `int $0x80` through a DPL-3 interrupt gate; returns with `iret`.
    /// All seven registers carry the ABI as is.
    Int80 = 0,
    /// `sysenter`/`sysexit`. SYSENTER saves nothing and SYSEXIT takes the
    /// return ESP from ECX and EIP from EDX, so the user stub pushes EBP
    /// (arg 6), EDX (arg 3), ECX (arg 2) and its return address, copies ESP
    /// into EBP and executes `sysenter`; the kernel reads those four words at
    /// `[EBP]` and returns to the address with ESP just above it. The stub
    /// then pops ECX, EDX, EBP, so every ABI register is preserved.
    Sysenter = 1,
    /// `lcall` through a DPL-3 call gate; returns with `lret`. All seven
    /// registers carry the ABI as is.
    CallGate = 2,
    /// AMD `syscall`/`sysret` in legacy mode. SYSCALL puts the return EIP in
    /// ECX and does not switch stacks, so the stub pushes ECX (arg 2) and the
    /// kernel reads it at `[ESP]`; the stub pops it back afterwards.
    Syscall = 3,
}

impl Mechanism {
    pub const ALL: [Mechanism; 4] = [
        Mechanism::Int80,
        Mechanism::Sysenter,
        Mechanism::CallGate,
        Mechanism::Syscall,
    ];

    /// Short name used on the command line, in records and in xtask flags.
    pub fn key(self) -> &'static str {
        match self {
            Mechanism::Int80 => "int80",
            Mechanism::Sysenter => "sysenter",
            Mechanism::CallGate => "callgate",
            Mechanism::Syscall => "syscall",
        }
    }

    /// Name for human tables.
    pub fn title(self) -> &'static str {
        match self {
            Mechanism::Int80 => "int 0x80",
            Mechanism::Sysenter => "sysenter",
            Mechanism::CallGate => "call gate",
            Mechanism::Syscall => "syscall",
        }
    }

    pub fn from_key(s: &str) -> Option<Mechanism> {
        Self::ALL.into_iter().find(|m| m.key() == s)
    }

    pub fn from_u32(v: u32) -> Option<Mechanism> {
        Self::ALL.get(v as usize).copied()
    }

    /// This mechanism's one of `each`, given in [`Mechanism::ALL`]'s order
    /// (int80, sysenter, callgate, syscall).
    pub fn pick<T: Copy>(self, each: [T; 4]) -> T {
        each[self as usize]
    }
}

/// What `cpuinfo` copies out: the CPU features user programs time with,
/// which mechanisms the kernel set up, and the benchmark settings from the
/// kernel command line.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct CpuInfo {
    /// Bit `m as u32` set when mechanism `m` is usable.
    pub mechanisms: u32,
    /// CPUID signature (EAX of leaf 1), 0 without CPUID.
    pub signature: u32,
    /// [`Feature`] bits.
    pub features: u32,
    /// TSC ticks per second as the kernel measured them against the PIT
    /// (under icount: virtual time, one instruction per nanosecond); 0 if unknown.
    pub tsc_hz: u64,
    /// `batches` and `batch_size` from the command line.
    pub batches: u32,
    pub batch_size: u32,
    /// 0 = tsc, 1 = icount (`cmdline::Clock`).
    pub clock: u32,
    /// The `entry=` mask from the command line.
    pub entry: u32,
    /// `seed` and `fuzz_calls` from the command line, for the fuzzer.
    pub seed: u32,
    pub fuzz_calls: u32,
    /// `fuzz_threads` from the command line: the fuzzer's threads phase.
    pub fuzz_threads: u32,
    /// Which emulator the host said runs the kernel (`accel=`): [`EMULATOR_NONE`],
    /// [`EMULATOR_TCG`] (a TSC there follows the host's clock) or
    /// [`EMULATOR_BOCHS`] (its TSC counts instructions). Emulated ticks are no cycles.
    pub emulated: u32,
    /// `pool_align=` from the command line (bytes, 0 = packed), or
    /// [`POOL_ALIGN_EVERY`] when it does not say.
    pub pool_align: u32,
    /// How many CPUs run (the bootstrap processor and every started AP):
    /// `thread_create` takes CPUs `0..cpus`.
    pub cpus: u32,
    /// `fork_pages=` from the command line: how many touched pages the
    /// forktest parent holds.
    pub fork_pages: u32,
    /// `bench=` from the command line: the `lmbench` program's row groups
    /// (`crate::lmbench::group` bits).
    pub lmbench: u32,
    /// `fork=` from the command line: 0 copy, 1 copy-on-write.
    pub fork_cow: u32,
}

/// [`CpuInfo::pool_align`] when the command line names no layout: the lock
/// benchmarks then measure every layout in one boot.
pub const POOL_ALIGN_EVERY: u32 = u32::MAX;

bitflags::bitflags! {
    /// [`CpuInfo::features`]: what a user program may time with.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct Feature: u32 {
        /// RDTSC is usable from ring 3.
        const TSC = 1 << 0;
        /// SSE2: LFENCE exists, so it can order RDTSC (else CPUID serialises).
        const SSE2 = 1 << 1;
        /// RDTSCP exists.
        const RDTSCP = 1 << 2;
        /// The kernel enabled architectural fixed counters 0 (instructions
        /// retired) and 1 (core cycles) and RDPMC from ring 3 (CPUID leaf
        /// 0xA, version 2+, and a check in ring 0 that they count). The bit
        /// clears for the rest of the boot once a ring-3 RDPMC faults: the
        /// kernel then resumes the program after the RDPMC with EDX:EAX = 0,
        /// so a program re-reads `cpuinfo` after reading the counters to know
        /// whether the values were real.
        const FIXED_PMC = 1 << 3;
    }
}

// The bits as plain words, for the programs that test `CpuInfo::features`.
pub const FEATURE_TSC: u32 = Feature::TSC.bits();
pub const FEATURE_SSE2: u32 = Feature::SSE2.bits();
pub const FEATURE_RDTSCP: u32 = Feature::RDTSCP.bits();
pub const FEATURE_FIXED_PMC: u32 = Feature::FIXED_PMC.bits();
/// RDPMC's ECX bit 30: read fixed-function counter ECX[29:0] (SDM Vol. 2B,
/// RDPMC); fixed counter 0 counts instructions retired, 1 core cycles.
pub const RDPMC_FIXED: u32 = 1 << 30;

/// `CpuInfo::emulated`: real hardware, or a VMM the host did not name.
pub const EMULATOR_NONE: u32 = 0;
/// `CpuInfo::emulated`: QEMU's TCG (`accel=tcg`).
pub const EMULATOR_TCG: u32 = 1;
/// `CpuInfo::emulated`: Bochs (`accel=bochs`).
pub const EMULATOR_BOCHS: u32 = 2;

/// The emulator an `accel=` value names.
pub fn emulator_of(accel: &str) -> u32 {
    match accel {
        crate::cmdline::ACCEL_TCG => EMULATOR_TCG,
        crate::cmdline::ACCEL_BOCHS => EMULATOR_BOCHS,
        _ => EMULATOR_NONE,
    }
}

/// What one TSC tick is on `emulated`: the unit of every TSC figure.
/// Bochs's TSC advances one tick per instruction (measured: its path
/// lengths equal QEMU's icount counts), but it is still no cycle.
pub fn tsc_unit(emulated: u32) -> &'static str {
    match emulated {
        EMULATOR_TCG => "TCG ticks",
        EMULATOR_BOCHS => "Bochs ticks",
        _ => "cycles",
    }
}

/// What a Bochs tick is, as reports say it.
pub const BOCHS_TICK: &str = "Bochs: 1 tick = 1 instruction";

impl CpuInfo {
    /// What one tick of the timed regions is: "instructions" under icount,
    /// "TCG ticks" or "Bochs ticks" for the TSC under emulation, "cycles"
    /// otherwise.
    pub fn unit(&self) -> &'static str {
        match self.clock {
            1 => "instructions",
            _ => tsc_unit(self.emulated),
        }
    }

    /// The clock's word as the command line and the records say it
    /// (`cmdline::Clock::key`): `icount` or `tsc`.
    pub fn clock_key(&self) -> &'static str {
        match self.clock {
            1 => crate::cmdline::Clock::Icount.key(),
            _ => crate::cmdline::Clock::Tsc.key(),
        }
    }

    pub fn has(&self, m: Mechanism) -> bool {
        self.mechanisms & (1 << m as u32) != 0
    }
    /// Usable and selected by `entry=`.
    pub fn wanted(&self, m: Mechanism) -> bool {
        self.has(m) && self.entry & (1 << m as u32) != 0
    }
}

/// What `argsum` returns for these arguments.
pub fn argsum(a: [u32; 6]) -> u32 {
    a.iter().enumerate().fold(0u32, |s, (i, &v)| {
        s.wrapping_add(v.wrapping_mul(i as u32 + 1))
    })
}

/// Arguments whose [`argsum`] proves each one arrived in its place (no two
/// alike, so an argument in another's register changes the sum).
pub const ARGSUM_PROBE: [u32; 6] = [
    0x0101_0101,
    0x0202_0202,
    0x0303_0303,
    0x0404_0404,
    0x0505_0505,
    0x0606_0606,
];

/// Returns `Err(errno)` for a negative result, `Ok(value)` otherwise.
pub fn decode(ret: u32) -> Result<u32, i32> {
    let v = ret as i32;
    if (-4095..0).contains(&v) {
        Err(-v)
    } else {
        Ok(ret)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wait_encodings_stay_apart() {
        assert_eq!(wait::exit_code(wait::exited(42)), Some(42));
        assert_eq!(wait::term_signal(wait::exited(42)), None);
        for v in 0..32u8 {
            let s = wait::faulted(v);
            assert_eq!(wait::fault_vector(s), Some(v));
            assert_eq!(wait::term_signal(s), None);
            assert_eq!(wait::exit_code(s), None);
        }
        for n in 1..sig::NSIG {
            let s = wait::signalled(n);
            assert_eq!(wait::term_signal(s), Some(n));
            assert_eq!(wait::fault_vector(s), None);
            assert_eq!(wait::exit_code(s), None);
        }
        assert_eq!(wait::term_signal(wait::BAD_STACK), None);
        assert_eq!(wait::fault_vector(wait::BAD_STACK), None);
    }

    #[test]
    fn pick_follows_all() {
        for m in Mechanism::ALL {
            assert_eq!(m.pick(Mechanism::ALL), m);
            assert_eq!(m.pick(Mechanism::ALL.map(Mechanism::key)), m.key());
        }
    }

    #[test]
    fn signal_frame_layout() {
        use core::mem::{offset_of, size_of};
        assert_eq!(size_of::<sig::Saved>(), 44);
        assert_eq!(offset_of!(sig::Frame, saved), 8);
        assert_eq!(size_of::<sig::Frame>(), 64);
        assert_eq!(sig::TRAMPOLINE[4] as u32, nr::SIGRETURN);
        assert_eq!(nr::COUNT, 34);
        assert_eq!(nr::name(nr::SIGRETURN), "sigreturn");
    }
}
