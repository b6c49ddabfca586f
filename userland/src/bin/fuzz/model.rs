// The fuzzer's model of the kernel: for each planned call, the exact value
// or errno it must return, and the state the kernel keeps (the ring
// buffer, the main thread's mutex word). Included into main.rs.

/// Numbers the table has that the fuzzer calls: all but EXIT and
/// THREAD_EXIT (they end the caller) and TRACE (it prints a page per call).
/// THREAD_CREATE is called here with arguments it must refuse; the rounds
/// ([`Round`]) create the threads. FORK's child exits at once with
/// [`FORK_CHILD_EXIT`], and the main loop reaps it; so `waitpid` finds no
/// child at any other time (ECHILD), and `sbrk` keeps the heap empty
/// (deltas that fail, or 0): the pointers the fuzzer calls bad stay bad.
///
/// Of the pipe and signal calls: `pipe` only with pointers it must refuse
/// (no pipe is ever made, so every descriptor past the fixed ones is bad
/// for `read`, `write`, `close` and `dup2`); `kill` only to itself (pid 1
/// ignores default actions) or to pids that do not exist; `sigaction` only
/// with `SIG_DFL` or `SIG_IGN` (a random handler would be called by the
/// first signal). Never `sigreturn`: it would unwind a frame that is not
/// there (and end the fuzzer, as it must).
const VALID: [u32; 29] = [
    nr::NULL,
    nr::WRITE,
    nr::READ,
    nr::GETPID,
    nr::GETEUID,
    nr::YIELD,
    nr::CPUINFO,
    nr::ENTRY_FLOOR,
    nr::ARGSUM,
    nr::SLEEP,
    nr::THREAD_CREATE,
    nr::UMTX_LOCK,
    nr::UMTX_UNLOCK,
    nr::SLEEP_ON,
    nr::WAKEUP,
    nr::POOL_ALIGN,
    nr::GETTID,
    nr::GETPRIO,
    nr::LOOKUP_BENCH,
    nr::RECORD,
    nr::FORK,
    nr::WAITPID,
    nr::GETPPID,
    nr::SBRK,
    nr::PIPE,
    nr::CLOSE,
    nr::DUP2,
    nr::KILL,
    nr::SIGACTION,
];

/// The exit code of a child the fuzzer forks.
const FORK_CHILD_EXIT: i32 = 0x5a;

/// The main thread's own user mutex word: the model knows its value (0 or
/// the main thread's tid); no other thread touches it.
static MAIN_UMTX: AtomicU32 = AtomicU32::new(0);

/// Channels the helpers sleep on: their own (with a timeout) and the one
/// they wait on at the end of a round. The main thread's channels avoid
/// them, so its `wakeup` wakes nobody.
const HELPER_CHAN: u32 = 0x4845_4c00;
const DONE_CHAN: u32 = 0x444f_4e45;

/// A channel for the main thread: any word but the helpers'. Often one
/// of the numbers a kernel might use for a channel of its own (the old
/// `sleep` used `0xfffff000 | thread`): `sleep` must not be woken by them.
fn main_chan(r: &mut Rng) -> u32 {
    let c = match r.below(4) {
        0 => 0xffff_f000 + r.below(MAX_THREADS as u32),
        _ => word(r),
    };
    if c == DONE_CHAN || (HELPER_CHAN..HELPER_CHAN + MAX_THREADS as u32).contains(&c) {
        c ^ 0x0100_0000
    } else {
        c
    }
}

/// What the kernel must return.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Want {
    Value(u32),
    Errno(i32),
    /// `fork` in the parent: a child's pid (positive, not an errno).
    Pid,
}

impl Want {
    fn raw(self) -> u32 {
        match self {
            Want::Value(v) => v,
            Want::Errno(e) => (-e) as u32,
            Want::Pid => 0,
        }
    }
}

/// The fuzzer's picture of the kernel: the ring buffer's contents.
struct Model {
    ring: [u8; fd::RING_SIZE],
    head: usize,
    len: usize,
    pid: u32,
    usable: u32,
    info: CpuInfo,
    /// The main thread's tid.
    tid: u32,
    /// Helper threads are alive (a crowd round): `pool_align` is -EBUSY,
    /// and a turnstile may exist, so `lookup_bench` gets counts it refuses.
    crowd: bool,
    /// The main thread owns [`MAIN_UMTX`] (the word holds its tid).
    umtx_mine: bool,
}

/// One generated call and what it must give.
struct Plan {
    mech: Mechanism,
    nr: u32,
    args: [u32; 6],
    flags: u32,
    want: Want,
    /// For reads and cpuinfo: where the kernel writes and how much must
    /// match (checked after the call).
    out: Option<(u32, usize)>,
}

impl Model {
    fn ring_push(&mut self, bytes: &[u8]) -> usize {
        let n = bytes.len().min(fd::RING_SIZE - self.len);
        for &b in &bytes[..n] {
            self.ring[(self.head + self.len) % fd::RING_SIZE] = b;
            self.len += 1;
        }
        n
    }

    /// Plans one call, updating the model as the kernel must update itself.
    fn plan(&mut self, r: &mut Rng, mechs: &[Mechanism]) -> Plan {
        let mech = r.pick(mechs);
        let flags = r.next() & HOSTILE;
        let mut args = [word(r), word(r), word(r), word(r), word(r), word(r)];
        let number = if r.below(4) != 0 {
            r.pick(&VALID)
        } else {
            match r.below(4) {
                0 => nr::COUNT + r.below(16),
                1 => u32::MAX - r.below(16),
                2 => 0x8000_0000 | r.next(),
                _ => nr::COUNT + r.below(u32::MAX - nr::COUNT),
            }
        };
        let mut out = None;
        let want = match number {
            nr::NULL | nr::YIELD => Want::Value(0),
            nr::GETPID => Want::Value(self.pid),
            nr::GETEUID => Want::Value(DEFAULT_EUID),
            nr::ARGSUM => Want::Value(argsum(args)),
            nr::WRITE => {
                let (p, len, kind) = range(r, None);
                let mut fdn = any_fd(r);
                // Nothing reaches the console: valid writes to it go to the null device.
                if (fdn == fd::STDOUT || fdn == fd::STDERR) && kind != Range::Bad {
                    fdn = fd::NULL;
                }
                args[0] = fdn;
                args[1] = p;
                args[2] = len;
                if !kind.readable() {
                    Want::Errno(errno::EFAULT)
                } else {
                    match fdn {
                        fd::STDOUT | fd::STDERR | fd::NULL => Want::Value(len),
                        fd::RING => {
                            // SAFETY: a readable range of this program's own
                            // memory (or empty), as the kernel reads it.
                            let bytes = unsafe { user_bytes(p, len) };
                            Want::Value(self.ring_push(bytes) as u32)
                        }
                        _ => Want::Errno(errno::EBADF),
                    }
                }
            }
            nr::READ => {
                let (p, len, kind) = range(r, None);
                let fdn = any_fd(r);
                args[0] = fdn;
                args[1] = p;
                args[2] = len;
                if !kind.writable() {
                    Want::Errno(errno::EFAULT)
                } else {
                    match fdn {
                        fd::STDIN | fd::NULL => Want::Value(0),
                        fd::RING => {
                            let n = (len as usize).min(self.len);
                            out = Some((p, n));
                            Want::Value(n as u32)
                        }
                        _ => Want::Errno(errno::EBADF),
                    }
                }
            }
            nr::CPUINFO => {
                let size = core::mem::size_of::<CpuInfo>() as u32;
                let (p, _, kind) = range(r, Some(size));
                let len = match r.below(4) {
                    0 => r.below(size),
                    1 => size,
                    2 => size + r.below(64),
                    _ => r.next(),
                };
                args[0] = p;
                args[1] = len;
                if len < size {
                    Want::Errno(errno::EINVAL)
                } else if kind != Range::Writable {
                    Want::Errno(errno::EFAULT)
                } else {
                    out = Some((p, size as usize));
                    Want::Value(0)
                }
            }
            nr::ENTRY_FLOOR => {
                let m = match r.below(3) {
                    0 => r.below(6),
                    _ => r.below(4),
                };
                let mut on = match r.below(3) {
                    0 => word(r),
                    _ => r.below(2),
                };
                // Never the floor of sysenter or syscall (see the module comment).
                let fast = m == Mechanism::Sysenter as u32 || m == Mechanism::Syscall as u32;
                if fast && on == 1 {
                    on = 0;
                }
                args[0] = m;
                args[1] = on;
                let usable =
                    Mechanism::from_u32(m).is_some_and(|k| self.usable & (1 << k as u32) != 0);
                if usable && on <= 1 {
                    Want::Value(0)
                } else {
                    Want::Errno(errno::EINVAL)
                }
            }
            nr::PIPE => {
                // Never a writable pointer: the two words would be stored.
                let (mut p, _, kind) = range(r, Some(8));
                if kind.writable() {
                    p = READ_ONLY.as_ptr() as u32;
                }
                args[0] = p;
                Want::Errno(errno::EFAULT)
            }
            nr::CLOSE => {
                args[0] = any_fd(r);
                Want::Errno(errno::EBADF)
            }
            nr::DUP2 => {
                args[0] = any_fd(r);
                args[1] = any_fd(r);
                Want::Errno(errno::EBADF)
            }
            nr::KILL => {
                use userland::abi::syscall::sig::NSIG;
                args[0] = match r.below(4) {
                    0 => self.pid,
                    1 => 0,
                    2 => 0x8000_0000 | r.next(),
                    _ => 0x7fff_0000 + r.below(0x1_0000),
                };
                args[1] = match r.below(4) {
                    0 => 0,
                    1 | 2 => r.below(NSIG),
                    _ => NSIG + r.below(u32::MAX - NSIG),
                };
                if args[1] >= NSIG || (args[0] as i32) <= 0 {
                    Want::Errno(errno::EINVAL)
                } else if args[0] == self.pid {
                    Want::Value(0)
                } else {
                    Want::Errno(errno::ESRCH)
                }
            }
            nr::SIGACTION => {
                use userland::abi::syscall::sig::{NSIG, SIGKILL};
                args[0] = match r.below(4) {
                    0 => r.pick(&[0, SIGKILL, NSIG]),
                    1 => word(r),
                    _ => r.below(NSIG),
                };
                let valid = args[0] != 0 && args[0] < NSIG && args[0] != SIGKILL;
                // SIG_DFL or SIG_IGN for a signal it takes; anything for one it refuses.
                args[1] = if valid { r.below(2) } else { word(r) };
                // No old handler, or a pointer it must refuse.
                let (old, bad) = match r.below(2) {
                    0 => (0, false),
                    _ => {
                        let (mut p, _, kind) = range(r, Some(4));
                        if kind.writable() {
                            p = READ_ONLY.as_ptr() as u32;
                        }
                        // A null pointer is "no old handler", not a bad one.
                        (p, p != 0)
                    }
                };
                args[2] = old;
                if !valid {
                    Want::Errno(errno::EINVAL)
                } else if bad {
                    Want::Errno(errno::EFAULT)
                } else {
                    Want::Value(0)
                }
            }
            nr::GETTID => Want::Value(self.tid),
            nr::GETPPID => Want::Value(0),
            nr::FORK => Want::Pid,
            nr::WAITPID => {
                // The status pointer is checked first (EFAULT), then the
                // flags (EINVAL); no child is left to wait for (ECHILD).
                let (status, bad) = match r.below(4) {
                    0 => (0, false),
                    1 => (scratch() + (r.below(MAX_SMALL) & !3), false),
                    _ => (
                        r.pick(&[
                            4,
                            0x1000,
                            KERNEL_MAP_END - 4,
                            USER_TOP - 2,
                            READ_ONLY.as_ptr() as u32,
                        ]),
                        true,
                    ),
                };
                args[1] = status;
                args[2] = match r.below(3) {
                    0 => 0,
                    1 => userland::abi::syscall::wait::WNOHANG,
                    _ => word(r),
                };
                if bad {
                    Want::Errno(errno::EFAULT)
                } else if args[2] & !userland::abi::syscall::wait::WNOHANG != 0 {
                    Want::Errno(errno::EINVAL)
                } else {
                    Want::Errno(errno::ECHILD)
                }
            }
            nr::SBRK => {
                // 0 gives the break; anything else here fails: below the
                // heap's base, or past its most.
                args[0] = match r.below(3) {
                    0 => 0,
                    1 => (r.below(0x7fff_ffff) + 1).wrapping_neg(),
                    _ => USER_HEAP_MAX + 1 + r.below(0x7fff_ffff - USER_HEAP_MAX),
                };
                if args[0] == 0 {
                    Want::Value(USER_HEAP_BASE)
                } else {
                    Want::Errno(errno::ENOMEM)
                }
            }
            nr::GETPRIO => {
                // Its own tid (the base priority: nobody waits on what it
                // holds), or one no thread has.
                args[0] = match r.below(2) {
                    0 => self.tid,
                    _ => 0x8000_0000 | r.next(),
                };
                if args[0] == self.tid {
                    Want::Value(PRIO_USER)
                } else {
                    Want::Errno(errno::ESRCH)
                }
            }
            nr::SLEEP => {
                // Short naps only: a long one is a hang of our own making.
                args[0] = r.below(3);
                Want::Value(0)
            }
            nr::SLEEP_ON => {
                args[0] = main_chan(r);
                args[1] = 1 + r.below(3);
                Want::Errno(errno::ETIMEDOUT)
            }
            nr::WAKEUP => {
                args[0] = main_chan(r);
                Want::Value(0)
            }
            nr::THREAD_CREATE => {
                // Arguments it must refuse: a bad entry or stack, or a
                // priority past PRIO_MAX with good ones.
                let code = main as *const () as u32;
                // Addresses no program maps, or the kernel's, or past user space.
                let bad = |r: &mut Rng| {
                    let unmapped = IMAGE_LIMIT + (r.below(0x1000) & !3);
                    r.pick(&[
                        0,
                        4,
                        KERNEL_MAP_END - 4,
                        0x10_0000,
                        USER_BASE - 4,
                        unmapped,
                        STACK_BOTTOM - PAGE_SIZE,
                        USER_TOP,
                        u32::MAX & !3,
                    ])
                };
                let (eip, eip_ok) = match r.below(3) {
                    0 => (code, true),
                    1 => (READ_ONLY.as_ptr() as u32, true),
                    _ => (bad(r), false),
                };
                // The kernel checks [esp - 4, esp) writable.
                let (esp, esp_ok) = match r.below(3) {
                    0 => (scratch() + 4 + (r.below(MAX_SMALL) & !3), true),
                    1 => ((READ_ONLY.as_ptr() as u32 + 4) & !3, false),
                    _ => (bad(r).wrapping_add(4), false),
                };
                args[0] = eip;
                args[1] = esp;
                if !(eip_ok && esp_ok) {
                    Want::Errno(errno::EFAULT)
                } else {
                    args[3] = PRIO_MAX + 1 + r.below(u32::MAX - PRIO_MAX - 1);
                    Want::Errno(errno::EINVAL)
                }
            }
            nr::UMTX_LOCK | nr::UMTX_UNLOCK => {
                let w = (&raw const MAIN_UMTX) as u32;
                let addr = match r.below(4) {
                    0 | 1 => w,
                    2 => w + 1 + r.below(3),
                    _ => range(r, Some(4)).0,
                };
                args[0] = addr;
                let mine = self.umtx_mine;
                if addr % 4 != 0 {
                    Want::Errno(errno::EINVAL)
                } else if addr != w {
                    // Read-only, kernel, unmapped: never our writable words
                    // (range() keeps writable ones in the scratch buffer,
                    // which a fixed length of 4 marks Writable: avoid it).
                    if (scratch()..scratch() + SCRATCH_SIZE as u32).contains(&addr) {
                        args[0] = (READ_ONLY.as_ptr() as u32 + 3) & !3;
                    }
                    Want::Errno(errno::EFAULT)
                } else if number == nr::UMTX_LOCK {
                    if mine {
                        Want::Errno(errno::EDEADLK)
                    } else {
                        self.umtx_mine = true;
                        Want::Value(0)
                    }
                } else if mine {
                    self.umtx_mine = false;
                    Want::Value(0)
                } else {
                    Want::Errno(errno::EPERM)
                }
            }
            nr::POOL_ALIGN => {
                // A valid layout rarely: each prints the layout.
                args[0] = match r.below(64) {
                    0 => r.pick(&[128, 64, 0]),
                    _ => match word(r) {
                        128 | 64 | 0 => 1,
                        v => v,
                    },
                };
                match args[0] {
                    128 | 64 | 0 if self.crowd => Want::Errno(errno::EBUSY),
                    128 | 64 | 0 => Want::Value(0),
                    _ => Want::Errno(errno::EINVAL),
                }
            }
            nr::LOOKUP_BENCH => {
                args[0] = match r.below(8) {
                    0 => LOOKUP_BENCH_MAX + 1 + r.below(u32::MAX - LOOKUP_BENCH_MAX),
                    1 => u32::MAX,
                    2 if r.below(32) == 0 => LOOKUP_BENCH_MAX,
                    _ => r.below(257),
                };
                if self.crowd && args[0] <= LOOKUP_BENCH_MAX {
                    args[0] = LOOKUP_BENCH_MAX + 1;
                }
                if args[0] > LOOKUP_BENCH_MAX {
                    Want::Errno(errno::EINVAL)
                } else {
                    Want::Value(0)
                }
            }
            nr::RECORD => {
                let (p, len, kind) = range(r, None);
                let len = match r.below(8) {
                    0 => MAX_USER_RECORD as u32 + 1 + r.below(1 << 16),
                    _ => len,
                };
                args[0] = p;
                args[1] = len;
                if len == 0 || len as usize > MAX_USER_RECORD {
                    Want::Errno(errno::EINVAL)
                } else if !kind.readable() {
                    Want::Errno(errno::EFAULT)
                } else {
                    // SAFETY: a readable range of this program's memory.
                    let body = unsafe { user_bytes(p, len) };
                    if check_user_record(body).is_ok() {
                        // A body the kernel would print: send none instead.
                        args[1] = 0;
                    }
                    Want::Errno(errno::EINVAL)
                }
            }
            _ => Want::Errno(errno::ENOSYS),
        };
        Plan {
            mech,
            nr: number,
            args,
            flags,
            want,
            out,
        }
    }

    /// Checks what the kernel wrote to user memory for `p`; advances the ring.
    fn check_out(&mut self, p: &Plan) -> Result<(), &'static str> {
        let Some((at, n)) = p.out else {
            return Ok(());
        };
        // SAFETY: `at..at+n` lies in the scratch buffer (a writable range
        // the plan chose), which the kernel has just written.
        let got = unsafe { user_bytes(at, n as u32) };
        if p.nr == nr::CPUINFO {
            // SAFETY: the same bytes, as the struct the kernel copied out.
            let c = unsafe { (at as *const CpuInfo).read_unaligned() };
            return if c == self.info {
                Ok(())
            } else {
                Err("cpuinfo copied out something else")
            };
        }
        for &b in got {
            if b != self.ring[self.head] {
                return Err("the ring gave back other bytes");
            }
            self.head = (self.head + 1) % fd::RING_SIZE;
            self.len -= 1;
        }
        Ok(())
    }
}

/// The bytes at `[p, p+len)` of this program's memory.
///
/// # Safety
/// The range must be readable user memory of this program, or empty.
unsafe fn user_bytes(p: u32, len: u32) -> &'static [u8] {
    if len == 0 {
        return &[];
    }
    // SAFETY: the caller's promise.
    unsafe { core::slice::from_raw_parts(p as *const u8, len as usize) }
}
